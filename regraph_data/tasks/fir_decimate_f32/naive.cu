#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per output sample.
__global__ void fir_kernel(int m, int ntaps, int decim, const float* h, const float* x, float* y) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const float* xj = x + (size_t)j * decim;
    float acc = 0.0f;
    for (int k = 0; k < ntaps; ++k) acc += h[k] * xj[k];
    y[j] = acc;
}

extern "C" void fir_decimate_f32(int m, int ntaps, int decim, const float* h, const float* x, float* y) {
    float* d_h = nullptr;
    float* d_x = nullptr;
    float* d_y = nullptr;
    const size_t nx = size_t(m) * size_t(decim) + size_t(ntaps) - 1;
    do {
        TRY(cudaMalloc(&d_h, size_t(ntaps) * sizeof(float)));
        TRY(cudaMalloc(&d_x, nx * sizeof(float)));
        TRY(cudaMalloc(&d_y, size_t(m) * sizeof(float)));
        TRY(cudaMemcpy(d_h, h, size_t(ntaps) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_x, x, nx * sizeof(float), cudaMemcpyHostToDevice));
        fir_kernel<<<(m + 255) / 256, 256>>>(m, ntaps, decim, d_h, d_x, d_y);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(y, d_y, size_t(m) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_h);
    cudaFree(d_x);
    cudaFree(d_y);
}
