// Naive CUDA port: one thread per element; reads are coalesced along a row, writes are strided.
#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void transpose_naive(int rows, int cols, const float* in, float* out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[static_cast<size_t>(c) * rows + r] = in[static_cast<size_t>(r) * cols + c];
}

extern "C" void transpose_f32(int rows, int cols, const float* in, float* out) {
    float *din = nullptr, *dout = nullptr;
    size_t bytes = static_cast<size_t>(rows) * cols * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&din, bytes));
        CUDA_TRY(cudaMalloc(&dout, bytes));
        CUDA_TRY(cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice));
        transpose_naive<<<dim3((cols + 15) / 16, (rows + 15) / 16), dim3(16, 16)>>>(rows, cols, din, dout);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(din);
    cudaFree(dout);
}
