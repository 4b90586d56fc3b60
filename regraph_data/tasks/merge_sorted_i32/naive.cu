#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// Rank-based merge: element a[i] lands at i + #(b < a[i]); b[j] lands at j + #(a <= b[j]).
// Both searches are binary searches over the other array; one thread per input element.
__global__ void merge_by_rank(int na, int nb, const int* a, const int* b, int* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < na) {
        int v = a[t], lo = 0, hi = nb;
        while (lo < hi) { int mid = (lo + hi) >> 1; if (b[mid] < v) lo = mid + 1; else hi = mid; }
        out[t + lo] = v;
    } else if (t < na + nb) {
        int j = t - na, v = b[j], lo = 0, hi = na;
        while (lo < hi) { int mid = (lo + hi) >> 1; if (a[mid] <= v) lo = mid + 1; else hi = mid; }
        out[j + lo] = v;
    }
}

extern "C" void merge_sorted_i32(int na, int nb, const int* a, const int* b, int* out) {
    int *da = nullptr, *db = nullptr, *dout = nullptr;
    int total = na + nb;
    do {
        CUDA_TRY(cudaMalloc(&da, static_cast<size_t>(na > 0 ? na : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&db, static_cast<size_t>(nb > 0 ? nb : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dout, static_cast<size_t>(total > 0 ? total : 1) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(da, a, static_cast<size_t>(na) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(db, b, static_cast<size_t>(nb) * sizeof(int), cudaMemcpyHostToDevice));
        if (total > 0) merge_by_rank<<<(total + 255) / 256, 256>>>(na, nb, da, db, dout);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(out, dout, static_cast<size_t>(total) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
}
