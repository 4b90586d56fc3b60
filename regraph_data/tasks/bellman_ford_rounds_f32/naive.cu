#include <cuda_runtime.h>
#include <cstddef>
#include <utility>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void init_dist(int n, float* d) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < n) d[v] = v == 0 ? 0.0f : 1e30f;
}

// One thread per vertex pulls over its incoming edges; one launch per round.
__global__ void relax(int n, const int* row_ptr, const int* src, const float* w, const float* cur, float* nxt) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    float best = cur[v];
    for (int p = row_ptr[v]; p < row_ptr[v + 1]; ++p) best = fminf(best, cur[src[p]] + w[p]);
    nxt[v] = best;
}

extern "C" void bellman_ford_rounds_f32(int n, int m, int rounds, const int* row_ptr, const int* src, const float* w,
                                        float* dist) {
    int *drp = nullptr, *dsrc = nullptr, *dflag = nullptr;
    float *dw = nullptr, *d0 = nullptr, *d1 = nullptr;
    do {
        if (n <= 0) break;
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(n) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dsrc, static_cast<size_t>(m > 0 ? m : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dw, static_cast<size_t>(m > 0 ? m : 1) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&d0, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&d1, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dflag, sizeof(int)));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(n) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dsrc, src, static_cast<size_t>(m) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dw, w, static_cast<size_t>(m) * sizeof(float), cudaMemcpyHostToDevice));
        init_dist<<<(n + 255) / 256, 256>>>(n, d0);
        float* cur = d0;
        float* nxt = d1;
        bool ok = cudaGetLastError() == cudaSuccess;
        for (int r = 0; r < rounds && ok; ++r) {
            relax<<<(n + 255) / 256, 256>>>(n, drp, dsrc, dw, cur, nxt);
            ok = cudaGetLastError() == cudaSuccess;
            std::swap(cur, nxt);
        }
        if (!ok) break;
        CUDA_TRY(cudaMemcpy(dist, cur, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dsrc);
    cudaFree(dw);
    cudaFree(d0);
    cudaFree(d1);
    cudaFree(dflag);
}
