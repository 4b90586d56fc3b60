#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per query: a plain binary search over the whole key array in global memory.
__global__ void lower_bound_kernel(int n, int q, const long long* keys, const long long* queries, int* pos) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= q) return;
    long long v = queries[i];
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (keys[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    pos[i] = lo;
}

static cudaError_t run_search(int n, int q, const long long* keys, const long long* queries, int* pos) {
    lower_bound_kernel<<<(q + 255) / 256, 256>>>(n, q, keys, queries, pos);
    return cudaGetLastError();
}

extern "C" void lower_bound_i64(int n, int q, const long long* keys, const long long* queries, int* pos) {
    long long *dk = nullptr, *dq = nullptr;
    int* dp = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dk, static_cast<size_t>(n) * sizeof(long long)));
        CUDA_TRY(cudaMalloc(&dq, static_cast<size_t>(q) * sizeof(long long)));
        CUDA_TRY(cudaMalloc(&dp, static_cast<size_t>(q) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(dk, keys, static_cast<size_t>(n) * sizeof(long long), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dq, queries, static_cast<size_t>(q) * sizeof(long long), cudaMemcpyHostToDevice));
        CUDA_TRY(run_search(n, q, dk, dq, dp));
        CUDA_TRY(cudaMemcpy(pos, dp, static_cast<size_t>(q) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dk);
    cudaFree(dq);
    cudaFree(dp);
}
