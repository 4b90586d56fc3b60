#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per edge, two global atomic increments.
__global__ void degrees(int m, const int* src, const int* dst, int* out_deg, int* in_deg) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    atomicAdd(&out_deg[src[e]], 1);
    atomicAdd(&in_deg[dst[e]], 1);
}

static cudaError_t run_degrees(int m, const int* src, const int* dst, int* out_deg, int* in_deg) {
    degrees<<<(m + 255) / 256, 256>>>(m, src, dst, out_deg, in_deg);
    return cudaGetLastError();
}

extern "C" void degree_counts_i32(int n, int m, const int* src, const int* dst, int* out_deg, int* in_deg) {
    int *ds = nullptr, *dd = nullptr, *dout = nullptr, *din = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&ds, static_cast<size_t>(m) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dd, static_cast<size_t>(m) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dout, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&din, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(ds, src, static_cast<size_t>(m) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dd, dst, static_cast<size_t>(m) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dout, 0, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMemset(din, 0, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(run_degrees(m, ds, dd, dout, din));
        CUDA_TRY(cudaMemcpy(out_deg, dout, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(in_deg, din, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(ds);
    cudaFree(dd);
    cudaFree(dout);
    cudaFree(din);
}
