// Naive CUDA port: one thread per vertex pulls pr[u]/outdeg[u] over its incoming edges.
#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void init_rank(int n, float* pr) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < n) pr[v] = 1.0f / n;
}

__global__ void pull(int n, const int* in_ptr, const int* in_src, const int* out_deg, const float* cur, float* next) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    float acc = 0.0f;
    for (int e = in_ptr[v]; e < in_ptr[v + 1]; ++e) {
        int u = in_src[e];
        acc += cur[u] / out_deg[u];
    }
    next[v] = 0.15f / n + 0.85f * acc;
}

extern "C" void pagerank_pull_f32(int n, int m, int iters, const int* in_ptr, const int* in_src, const int* out_deg,
                                  float* pr) {
    int *dptr = nullptr, *dsrc = nullptr, *ddeg = nullptr;
    float *dcur = nullptr, *dnext = nullptr, *daux = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dptr, (static_cast<size_t>(n) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dsrc, static_cast<size_t>(m) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&ddeg, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dcur, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dnext, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&daux, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMemcpy(dptr, in_ptr, (static_cast<size_t>(n) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dsrc, in_src, static_cast<size_t>(m) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(ddeg, out_deg, static_cast<size_t>(n) * sizeof(int), cudaMemcpyHostToDevice));
        int blocks = (n + 255) / 256;
        init_rank<<<blocks, 256>>>(n, dcur);
        CUDA_TRY(cudaGetLastError());
        bool failed = false;
        for (int it = 0; it < iters; ++it) {
            pull<<<blocks, 256>>>(n, dptr, dsrc, ddeg, dcur, dnext);
            if (cudaGetLastError() != cudaSuccess) { failed = true; break; }
            float* t = dcur; dcur = dnext; dnext = t;
        }
        if (failed) break;
        CUDA_TRY(cudaMemcpy(pr, dcur, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dptr);
    cudaFree(dsrc);
    cudaFree(ddeg);
    cudaFree(dcur);
    cudaFree(dnext);
    cudaFree(daux);
}
