// Naive CUDA port: one thread per output row, straight loop over the columns.
#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void gemv_kernel(int m, int n, const float* A, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc += A[static_cast<size_t>(i) * n + j] * x[j];
    y[i] = acc;
}

extern "C" void gemv_rowmajor_f32(int m, int n, const float* A, const float* x, float* y) {
    float *dA = nullptr, *dx = nullptr, *dy = nullptr;
    size_t bytesA = static_cast<size_t>(m) * n * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&dA, bytesA));
        CUDA_TRY(cudaMalloc(&dx, n * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dy, m * sizeof(float)));
        CUDA_TRY(cudaMemcpy(dA, A, bytesA, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
        gemv_kernel<<<(m + 255) / 256, 256>>>(m, n, dA, dx, dy);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(y, dy, m * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dA);
    cudaFree(dx);
    cudaFree(dy);
}
