// Naive CUDA port: one thread per element of C, dot product straight from global memory.
#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void gemm_naive(int M, int N, int K, const float* A, const float* B, float* C) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[static_cast<size_t>(row) * K + k] * B[static_cast<size_t>(k) * N + col];
    C[static_cast<size_t>(row) * N + col] = acc;
}

extern "C" void gemm_f32(int M, int N, int K, const float* A, const float* B, float* C) {
    float *dA = nullptr, *dB = nullptr, *dC = nullptr;
    size_t bytesA = static_cast<size_t>(M) * K * sizeof(float);
    size_t bytesB = static_cast<size_t>(K) * N * sizeof(float);
    size_t bytesC = static_cast<size_t>(M) * N * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&dA, bytesA));
        CUDA_TRY(cudaMalloc(&dB, bytesB));
        CUDA_TRY(cudaMalloc(&dC, bytesC));
        CUDA_TRY(cudaMemcpy(dA, A, bytesA, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dB, B, bytesB, cudaMemcpyHostToDevice));
        gemm_naive<<<dim3((N + 15) / 16, (M + 15) / 16), dim3(16, 16)>>>(M, N, K, dA, dB, dC);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(C, dC, bytesC, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}
