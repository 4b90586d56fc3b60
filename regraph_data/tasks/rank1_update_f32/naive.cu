#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per matrix element, column index fastest so that a warp touches one row segment.
__global__ void ger(int m, int n, float alpha, const float* x, const float* y, float* A) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n) return;
    A[static_cast<size_t>(i) * n + j] += (alpha * x[i]) * y[j];
}

extern "C" void rank1_update_f32(int m, int n, float alpha, const float* x, const float* y, float* A) {
    float *dx = nullptr, *dy = nullptr, *dA = nullptr;
    size_t bytesA = static_cast<size_t>(m) * n * sizeof(float);
    do {
        if (m <= 0 || n <= 0) break;
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(m) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dy, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dA, bytesA));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(m) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dy, y, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dA, A, bytesA, cudaMemcpyHostToDevice));
        ger<<<dim3((n + 31) / 32, (m + 7) / 8), dim3(32, 8)>>>(m, n, alpha, dx, dy, dA);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(A, dA, bytesA, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dA);
}
