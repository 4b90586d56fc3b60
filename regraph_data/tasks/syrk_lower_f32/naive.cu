#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per element of C; threads above the diagonal have nothing to do.
__global__ void syrk_naive(int n, int k, float alpha, const float* A, float beta, float* C) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j > i) return;
    float acc = 0.0f;
    for (int p = 0; p < k; ++p) acc += A[static_cast<size_t>(i) * k + p] * A[static_cast<size_t>(j) * k + p];
    size_t c = static_cast<size_t>(i) * n + j;
    C[c] = alpha * acc + beta * C[c];
}

extern "C" void syrk_lower_f32(int n, int k, float alpha, const float* A, float beta, float* C) {
    float *dA = nullptr, *dC = nullptr;
    size_t bytesA = static_cast<size_t>(n) * k * sizeof(float);
    size_t bytesC = static_cast<size_t>(n) * n * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&dA, bytesA));
        CUDA_TRY(cudaMalloc(&dC, bytesC));
        CUDA_TRY(cudaMemcpy(dA, A, bytesA, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dC, C, bytesC, cudaMemcpyHostToDevice));
        syrk_naive<<<dim3((n + 15) / 16, (n + 15) / 16), dim3(16, 16)>>>(n, k, alpha, dA, beta, dC);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(C, dC, bytesC, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dA);
    cudaFree(dC);
}
