#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per output sample; coefficients and samples from global memory.
__global__ void fir_kernel(int n, int taps, const float* x, const float* coef, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < taps; ++k) acc += coef[k] * x[i + k];
    y[i] = acc;
}

extern "C" void fir_filter_f32(int n, int taps, const float* x, const float* coef, float* y) {
    float* d_x = nullptr;
    float* d_coef = nullptr;
    float* d_y = nullptr;
    do {
        TRY(cudaMalloc(&d_x, size_t(size_t(n) + taps - 1) * sizeof(float)));
        TRY(cudaMalloc(&d_coef, size_t(taps) * sizeof(float)));
        TRY(cudaMalloc(&d_y, size_t(n) * sizeof(float)));
        TRY(cudaMemcpy(d_x, x, size_t(size_t(n) + taps - 1) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_coef, coef, size_t(taps) * sizeof(float), cudaMemcpyHostToDevice));
        fir_kernel<<<(n + 255) / 256, 256>>>(n, taps, d_x, d_coef, d_y);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(y, d_y, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_x);
    cudaFree(d_coef);
    cudaFree(d_y);
}
