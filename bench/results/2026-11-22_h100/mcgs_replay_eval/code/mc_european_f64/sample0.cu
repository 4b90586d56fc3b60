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


constexpr int THREADS = 256;
constexpr int BLOCKS_PER_OPTION = 32;

__global__ void __launch_bounds__(THREADS) path_kernel(int npaths, unsigned long long seed, const double* __restrict__ S0,
                                                       const double* __restrict__ K, double* sum) {
    const int o = blockIdx.y;
    const double s0 = S0[o], k = K[o];
    double pay = 0.0;
    for (int p = 2 * (blockIdx.x * THREADS + threadIdx.x); p < npaths; p += 2 * gridDim.x * THREADS) {
        // p is even: paths p and p+1 share one Box-Muller pair and use both of its normals
        double u1, u2;
        uniforms(seed, ((unsigned long long)o * npaths + p) >> 1, u1, u2);
        const double rad = sqrt(-2.0 * log(u1));
        double s, c;
        sincospi(2.0 * u2, &s, &c);
        pay += fmax(s0 * exp((R - 0.5 * SIGMA * SIGMA) * T + SIGMA * sqrt(T) * (rad * c)) - k, 0.0);
        pay += fmax(s0 * exp((R - 0.5 * SIGMA * SIGMA) * T + SIGMA * sqrt(T) * (rad * s)) - k, 0.0);
    }
    __shared__ double warp_sum[THREADS / 32];
    for (int off = 16; off > 0; off >>= 1) pay += __shfl_down_sync(0xFFFFFFFFu, pay, off);
    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = pay;
    __syncthreads();
    if (threadIdx.x < 32) {
        pay = threadIdx.x < THREADS / 32 ? warp_sum[threadIdx.x] : 0.0;
        for (int off = 16; off > 0; off >>= 1) pay += __shfl_down_sync(0xFFFFFFFFu, pay, off);
        if (threadIdx.x == 0) atomicAdd(&sum[o], pay);
    }
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
        path_kernel<<<dim3(BLOCKS_PER_OPTION, nopt), THREADS>>>(npaths, seed, d_S0, d_K, d_sum);
        TRY(cudaGetLastError());
        finish_kernel<<<(nopt + 63) / 64, 64>>>(nopt, npaths, d_sum);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(price, d_sum, size_t(nopt) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_S0);
    cudaFree(d_K);
    cudaFree(d_sum);
}
