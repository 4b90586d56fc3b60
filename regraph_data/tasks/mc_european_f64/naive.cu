#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr double R = 0.05, SIGMA = 0.2, T = 1.0;

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// The two uniforms of Box-Muller pair g, identical to the reference.
__device__ __forceinline__ void uniforms(unsigned long long seed, unsigned long long g, double& u1, double& u2) {
    const unsigned long long h1 = splitmix64(seed + (2 * g + 1) * 0x9E3779B97F4A7C15ULL);
    const unsigned long long h2 = splitmix64(seed + (2 * g + 2) * 0x9E3779B97F4A7C15ULL);
    u1 = ((double)(h1 >> 11) + 0.5) * 0x1.0p-53;
    u2 = (double)(h2 >> 11) * 0x1.0p-53;
}

// price = exp(-rT) * sum / npaths, in place.
__global__ void finish_kernel(int nopt, int npaths, double* sum) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o < nopt) sum[o] = exp(-R * T) * sum[o] / npaths;
}


// One thread per (option, path); one double atomic per path.
__global__ void path_kernel(int npaths, unsigned long long seed, const double* S0, const double* K, double* sum) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const int o = blockIdx.y;
    if (p >= npaths) return;
    double u1, u2;
    uniforms(seed, ((unsigned long long)o * npaths + p) >> 1, u1, u2);
    const double rad = sqrt(-2.0 * log(u1));
    double s, c;
    sincospi(2.0 * u2, &s, &c);
    const double z = (p & 1) ? rad * s : rad * c;
    const double st = S0[o] * exp((R - 0.5 * SIGMA * SIGMA) * T + SIGMA * sqrt(T) * z);
    atomicAdd(&sum[o], fmax(st - K[o], 0.0));
}

extern "C" void mc_european_f64(int nopt, int npaths, unsigned long long seed, const double* S0, const double* K,
                                double* price) {
    double* d_S0 = nullptr;
    double* d_K = nullptr;
    double* d_sum = nullptr;
    do {
        TRY(cudaMalloc(&d_S0, size_t(nopt) * sizeof(double)));
        TRY(cudaMalloc(&d_K, size_t(nopt) * sizeof(double)));
        TRY(cudaMalloc(&d_sum, size_t(nopt) * sizeof(double)));
        TRY(cudaMemcpy(d_S0, S0, size_t(nopt) * sizeof(double), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_K, K, size_t(nopt) * sizeof(double), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_sum, 0, size_t(nopt) * sizeof(double)));
        path_kernel<<<dim3((npaths + 255) / 256, nopt), 256>>>(npaths, seed, d_S0, d_K, d_sum);
        TRY(cudaGetLastError());
        finish_kernel<<<(nopt + 63) / 64, 64>>>(nopt, npaths, d_sum);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(price, d_sum, size_t(nopt) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_S0);
    cudaFree(d_K);
    cudaFree(d_sum);
}
