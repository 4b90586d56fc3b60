// Naive CUDA port: one thread per query runs a textbook binary search over the keys in global memory.
#include <cuda_runtime.h>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void search_kernel(int n, int q, const float* keys, const float* queries, int* pos) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= q) return;
    float v = queries[i];
    int lo = 0, hi = n;  // invariant: keys[lo-1] < v <= keys[hi]
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (keys[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    pos[i] = lo;
}

extern "C" void search_sorted_f32(int n, int q, const float* keys, const float* queries, int* pos) {
    float *dkeys = nullptr, *dq = nullptr;
    int* dpos = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dkeys, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dq, static_cast<size_t>(q) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dpos, static_cast<size_t>(q) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(dkeys, keys, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dq, queries, static_cast<size_t>(q) * sizeof(float), cudaMemcpyHostToDevice));
        search_kernel<<<(q + 255) / 256, 256>>>(n, q, dkeys, dq, dpos);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(pos, dpos, static_cast<size_t>(q) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dkeys);
    cudaFree(dq);
    cudaFree(dpos);
}
