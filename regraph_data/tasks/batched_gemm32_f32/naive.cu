#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per output element; the flat index enumerates batch, row, column (column fastest).
__global__ void bgemm_naive(int batch, const float* A, const float* B, float* C) {
    size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= static_cast<size_t>(batch) * 1024) return;
    size_t base = t & ~static_cast<size_t>(1023);
    int r = static_cast<int>((t >> 5) & 31), c = static_cast<int>(t & 31);
    float acc = 0.0f;
    for (int k = 0; k < 32; ++k) acc += A[base + r * 32 + k] * B[base + k * 32 + c];
    C[t] = acc;
}

extern "C" void batched_gemm32_f32(int batch, const float* A, const float* B, float* C) {
    float *dA = nullptr, *dB = nullptr, *dC = nullptr;
    size_t bytes = static_cast<size_t>(batch) * 1024 * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&dA, bytes));
        CUDA_TRY(cudaMalloc(&dB, bytes));
        CUDA_TRY(cudaMalloc(&dC, bytes));
        CUDA_TRY(cudaMemcpy(dA, A, bytes, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dB, B, bytes, cudaMemcpyHostToDevice));
        size_t total = static_cast<size_t>(batch) * 1024;
        bgemm_naive<<<static_cast<unsigned>((total + 255) / 256), 256>>>(batch, dA, dB, dC);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(C, dC, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}
