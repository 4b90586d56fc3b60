#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

#include <cfloat>

constexpr int K = 8;
constexpr int TILE = 256;

__global__ void __launch_bounds__(TILE) knn_kernel(int nq, int np, const float* __restrict__ q, const float* __restrict__ p, float* __restrict__ dist) {
    __shared__ float4 tile[TILE];
    const int i = blockIdx.x * TILE + threadIdx.x;
    const bool active = i < nq;
    float best[K];
#pragma unroll
    for (int s = 0; s < K; ++s) best[s] = FLT_MAX;
    const float qx = active ? q[3 * i] : 0.0f, qy = active ? q[3 * i + 1] : 0.0f, qz = active ? q[3 * i + 2] : 0.0f;
    for (int base = 0; base < np; base += TILE) {
        const int j = base + threadIdx.x;
        if (j < np) tile[threadIdx.x] = make_float4(p[3 * j], p[3 * j + 1], p[3 * j + 2], 0.0f);
        __syncthreads();
        const int cnt = min(TILE, np - base);
        for (int t = 0; t < cnt; ++t) {
            const float4 pt = tile[t];
            const float dx = pt.x - qx, dy = pt.y - qy, dz = pt.z - qz;
            const float d = dx * dx + dy * dy + dz * dz;
            if (d >= best[K - 1]) continue;
            float v = d;
#pragma unroll
            for (int s = 0; s < K; ++s) {  // compare-exchange chain: sorted insertion without branches
                const float lo = fminf(best[s], v);
                v = fmaxf(best[s], v);
                best[s] = lo;
            }
        }
        __syncthreads();
    }
    if (active)
#pragma unroll
        for (int s = 0; s < K; ++s) dist[K * i + s] = best[s];
}

extern "C" void knn_dist_f32(int nq, int np, const float* q, const float* p, float* dist) {
    float* d_q = nullptr;
    float* d_p = nullptr;
    float* d_dist = nullptr;
    do {
        TRY(cudaMalloc(&d_q, size_t(3) * nq * sizeof(float)));
        TRY(cudaMalloc(&d_p, size_t(3) * np * sizeof(float)));
        TRY(cudaMalloc(&d_dist, size_t(K) * nq * sizeof(float)));
        TRY(cudaMemcpy(d_q, q, size_t(3) * nq * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_p, p, size_t(3) * np * sizeof(float), cudaMemcpyHostToDevice));
        knn_kernel<<<(nq + TILE - 1) / TILE, TILE>>>(nq, np, d_q, d_p, d_dist);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(dist, d_dist, size_t(K) * nq * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_q);
    cudaFree(d_p);
    cudaFree(d_dist);
}
