#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per row: each thread walks its own row sequentially.
__global__ void cdot_kernel(int rows, int len, const float* a, const float* b, float* out) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* x = a + 2 * (size_t)r * len;
    const float* y = b + 2 * (size_t)r * len;
    float re = 0.0f, im = 0.0f;
    for (int k = 0; k < len; ++k) {
        re += x[2 * k] * y[2 * k] + x[2 * k + 1] * y[2 * k + 1];
        im += x[2 * k + 1] * y[2 * k] - x[2 * k] * y[2 * k + 1];
    }
    out[2 * r] = re;
    out[2 * r + 1] = im;
}

extern "C" void complex_dot_rows_f32(int rows, int len, const float* a, const float* b, float* out) {
    float* d_a = nullptr;
    float* d_b = nullptr;
    float* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_a, size_t(2 * size_t(rows) * len) * sizeof(float)));
        TRY(cudaMalloc(&d_b, size_t(2 * size_t(rows) * len) * sizeof(float)));
        TRY(cudaMalloc(&d_out, size_t(2 * size_t(rows)) * sizeof(float)));
        TRY(cudaMemcpy(d_a, a, size_t(2 * size_t(rows) * len) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_b, b, size_t(2 * size_t(rows) * len) * sizeof(float), cudaMemcpyHostToDevice));
        cdot_kernel<<<(rows + 127) / 128, 128>>>(rows, len, d_a, d_b, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(2 * size_t(rows)) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_out);
}
