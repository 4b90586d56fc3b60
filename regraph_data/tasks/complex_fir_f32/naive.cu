#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXTAPS = 64;

// One thread per output sample; scalar loads of interleaved complex data.
__global__ void fir_kernel(int n, int ntaps, const float* h, const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float re = 0.0f, im = 0.0f;
    for (int k = 0; k < ntaps; ++k) {
        const float hr = h[2 * k], hi = h[2 * k + 1];
        const float xr = x[2 * (i + k)], xi = x[2 * (i + k) + 1];
        re += hr * xr - hi * xi;
        im += hr * xi + hi * xr;
    }
    y[2 * i] = re;
    y[2 * i + 1] = im;
}

extern "C" void complex_fir_f32(int n, int ntaps, const float* h, const float* x, float* y) {
    float* d_h = nullptr;
    float* d_x = nullptr;
    float* d_y = nullptr;
    const size_t nx = size_t(n) + size_t(ntaps) - 1;
    do {
        if (ntaps < 1 || ntaps > MAXTAPS) break;
        TRY(cudaMalloc(&d_h, size_t(2) * ntaps * sizeof(float)));
        TRY(cudaMalloc(&d_x, 2 * nx * sizeof(float)));
        TRY(cudaMalloc(&d_y, size_t(2) * n * sizeof(float)));
        TRY(cudaMemcpy(d_h, h, size_t(2) * ntaps * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_x, x, 2 * nx * sizeof(float), cudaMemcpyHostToDevice));
        fir_kernel<<<(n + 255) / 256, 256>>>(n, ntaps, d_h, d_x, d_y);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(y, d_y, size_t(2) * n * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_h);
    cudaFree(d_x);
    cudaFree(d_y);
}
