#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

#include <cfloat>

constexpr int K = 8;

// One thread per query; insertion into a sorted local list.
__global__ void knn_kernel(int nq, int np, const float* q, const float* p, float* dist) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nq) return;
    float best[K];
    for (int s = 0; s < K; ++s) best[s] = FLT_MAX;
    const float qx = q[3 * i], qy = q[3 * i + 1], qz = q[3 * i + 2];
    for (int j = 0; j < np; ++j) {
        const float dx = p[3 * j] - qx, dy = p[3 * j + 1] - qy, dz = p[3 * j + 2] - qz;
        const float d = dx * dx + dy * dy + dz * dz;
        if (d >= best[K - 1]) continue;
        int s = K - 1;
        while (s > 0 && best[s - 1] > d) { best[s] = best[s - 1]; --s; }
        best[s] = d;
    }
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
        knn_kernel<<<(nq + 255) / 256, 256>>>(nq, np, d_q, d_p, d_dist);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(dist, d_dist, size_t(K) * nq * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_q);
    cudaFree(d_p);
    cudaFree(d_dist);
}
