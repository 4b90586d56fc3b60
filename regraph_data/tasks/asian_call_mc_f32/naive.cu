#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr float R = 0.05f, SIGMA = 0.2f, T = 1.0f;

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Uniforms of draw c, identical to the reference (24-bit, exact in float).
__device__ __forceinline__ void uniforms(unsigned long long seed, unsigned long long c, float& u1, float& u2) {
    const unsigned long long h = splitmix64(seed + (c + 1) * 0x9E3779B97F4A7C15ULL);
    u1 = ((float)(h >> 40) + 0.5f) * 0x1.0p-24f;
    u2 = (float)((h >> 16) & 0xFFFFFFULL) * 0x1.0p-24f;
}

__global__ void finish_kernel(int nopt, int npaths, const double* sum, float* price) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o < nopt) price[o] = (float)(exp(-(double)R * T) * sum[o] / npaths);
}


// One thread per (option, path); one double atomic per path.
__global__ void path_kernel(int npaths, int nsteps, unsigned long long seed, const float* S0, const float* K, double* sum) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const int o = blockIdx.y;
    if (p >= npaths) return;
    const float dt = T / nsteps;
    const float drift = (R - 0.5f * SIGMA * SIGMA) * dt, vol = SIGMA * sqrtf(dt);
    float s = S0[o], acc = 0.0f;
    for (int t = 0; t < nsteps; ++t) {
        float u1, u2;
        uniforms(seed, (unsigned long long)p * nsteps + t, u1, u2);
        const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
        s *= expf(drift + vol * z);
        acc += s;
    }
    const float pay = fmaxf(acc / nsteps - K[o], 0.0f);
    atomicAdd(&sum[o], (double)pay);
}

extern "C" void asian_call_mc_f32(int nopt, int npaths, int nsteps, unsigned long long seed, const float* S0, const float* K,
                                  float* price) {
    float* d_S0 = nullptr;
    float* d_K = nullptr;
    float* d_price = nullptr;
    double* d_sum = nullptr;
    float* d_avg = nullptr;  // per-path average of the normalised path (restructured versions)
    do {
        TRY(cudaMalloc(&d_S0, size_t(nopt) * sizeof(float)));
        TRY(cudaMalloc(&d_K, size_t(nopt) * sizeof(float)));
        TRY(cudaMalloc(&d_price, size_t(nopt) * sizeof(float)));
        TRY(cudaMalloc(&d_sum, size_t(nopt) * sizeof(double)));
        TRY(cudaMemcpy(d_S0, S0, size_t(nopt) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_K, K, size_t(nopt) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_sum, 0, size_t(nopt) * sizeof(double)));
        path_kernel<<<dim3((npaths + 255) / 256, nopt), 256>>>(npaths, nsteps, seed, d_S0, d_K, d_sum);
        TRY(cudaGetLastError());
        finish_kernel<<<(nopt + 63) / 64, 64>>>(nopt, npaths, d_sum, d_price);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(price, d_price, size_t(nopt) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_S0);
    cudaFree(d_K);
    cudaFree(d_price);
    cudaFree(d_sum);
    cudaFree(d_avg);
}
