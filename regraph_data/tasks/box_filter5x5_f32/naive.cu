#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// One thread per output pixel; the 25 taps are read straight from global memory.
__global__ void box5x5_kernel(int h, int w, const float* img, float* out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int dy = -2; dy <= 2; ++dy) {
        const size_t row = (size_t)clampi(y + dy, 0, h - 1) * w;
        for (int dx = -2; dx <= 2; ++dx) acc += img[row + clampi(x + dx, 0, w - 1)];
    }
    out[(size_t)y * w + x] = acc * (1.0f / 25.0f);
}

extern "C" void box_filter5x5_f32(int h, int w, const float* img, float* out) {
    const size_t bytes = size_t(h) * size_t(w) * sizeof(float);
    float* d_img = nullptr;
    float* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_img, bytes));
        TRY(cudaMalloc(&d_out, bytes));
        TRY(cudaMemcpy(d_img, img, bytes, cudaMemcpyHostToDevice));
        const dim3 block(16, 16);
        const dim3 grid((w + block.x - 1) / block.x, (h + block.y - 1) / block.y);
        box5x5_kernel<<<grid, block>>>(h, w, d_img, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_img);
    cudaFree(d_out);
}
