// Naive CUDA port: each block sums 256 elements with a shared-memory tree, a second single-block
// kernel sums the per-block partials.
#include <cuda_runtime.h>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

constexpr int kBlock = 256;

__global__ void block_sum(int n, const double* x, double* partial) {
    __shared__ double s[kBlock];
    int i = blockIdx.x * kBlock + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0;
    __syncthreads();
    for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void final_sum(int count, const double* partial, double* out) {
    __shared__ double s[kBlock];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += kBlock) acc += partial[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = s[0];
}

extern "C" void reduce_sum_f64(int n, const double* x, double* out) {
    double *dx = nullptr, *dpartial = nullptr, *dout = nullptr;
    int blocks = (n + kBlock - 1) / kBlock;
    do {
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(n) * sizeof(double)));
        CUDA_TRY(cudaMalloc(&dpartial, static_cast<size_t>(blocks) * sizeof(double)));
        CUDA_TRY(cudaMalloc(&dout, sizeof(double)));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(n) * sizeof(double), cudaMemcpyHostToDevice));
        block_sum<<<blocks, kBlock>>>(n, dx, dpartial);
        CUDA_TRY(cudaGetLastError());
        final_sum<<<1, kBlock>>>(blocks, dpartial, dout);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(out, dout, sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dpartial);
    cudaFree(dout);
}
