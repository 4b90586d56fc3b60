#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// Counter-based generator: a stateless hash of (seed, index), identical to the reference.
__device__ __forceinline__ unsigned long long splitmix64(unsigned long long z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ unsigned hit(unsigned long long seed, long long i) {
    const unsigned long long h = splitmix64(seed + (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ULL);
    const unsigned long long x = h >> 40, y = (h >> 16) & 0xFFFFFFULL;
    return (x * x + y * y < (1ULL << 48)) ? 1u : 0u;
}

// One thread per point; hits are counted with a global 64-bit atomic.
__global__ void pi_kernel(long long npoints, unsigned long long seed, unsigned long long* count) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npoints) return;
    if (hit(seed, i)) atomicAdd(count, 1ULL);
}

extern "C" void mc_pi_count_u64(long long npoints, unsigned long long seed, unsigned long long* count) {
    unsigned long long* d_count = nullptr;
    do {
        TRY(cudaMalloc(&d_count, size_t(1) * sizeof(unsigned long long)));
        TRY(cudaMemset(d_count, 0, sizeof(unsigned long long)));
        pi_kernel<<<(unsigned)((npoints + 255) / 256), 256>>>(npoints, seed, d_count);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(count, d_count, size_t(1) * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_count);
}
