#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One launch per item: all capacities of the next row are computed in parallel from the previous row
// (two buffers, since an in-place parallel update could use the item twice).
__global__ void item_kernel(int cap, int w, int v, const int* prev, int* next) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c > cap) return;
    int b = prev[c];
    if (c >= w) b = max(b, prev[c - w] + v);
    next[c] = b;
}

extern "C" void knapsack01_i32(int nitems, int cap, const int* wt, const int* val, int* best) {
    int* d_cur = nullptr;
    int* d_nxt = nullptr;
    do {
        TRY(cudaMalloc(&d_cur, size_t(size_t(cap) + 1) * sizeof(int)));
        TRY(cudaMalloc(&d_nxt, size_t(size_t(cap) + 1) * sizeof(int)));
        TRY(cudaMemset(d_cur, 0, (size_t(cap) + 1) * sizeof(int)));
        const int blocks = (cap + 1 + 255) / 256;
        bool failed = false;
        for (int i = 0; i < nitems && !failed; ++i) {
            item_kernel<<<blocks, 256>>>(cap, wt[i], val[i], d_cur, d_nxt);
            failed = cudaGetLastError() != cudaSuccess;
            int* t = d_cur; d_cur = d_nxt; d_nxt = t;
        }
        if (failed) break;
        TRY(cudaMemcpy(best, d_cur, (size_t(cap) + 1) * sizeof(int), cudaMemcpyDeviceToHost));
        TRY(cudaGetLastError());
    } while (0);
    cudaFree(d_cur);
    cudaFree(d_nxt);
}
