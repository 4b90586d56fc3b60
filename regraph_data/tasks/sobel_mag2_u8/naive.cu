#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per pixel, neighbours read straight from global memory.
__global__ void sobel_kernel(int h, int w, const unsigned char* img, int* out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    const size_t o = (size_t)y * w + x;
    if (y == 0 || x == 0 || y == h - 1 || x == w - 1) { out[o] = 0; return; }
    const unsigned char* r0 = img + o - w;
    const unsigned char* r1 = img + o;
    const unsigned char* r2 = img + o + w;
    const int gx = (r0[1] + 2 * r1[1] + r2[1]) - (r0[-1] + 2 * r1[-1] + r2[-1]);
    const int gy = (r2[-1] + 2 * r2[0] + r2[1]) - (r0[-1] + 2 * r0[0] + r0[1]);
    out[o] = gx * gx + gy * gy;
}

extern "C" void sobel_mag2_u8(int h, int w, const unsigned char* img, int* out) {
    unsigned char* d_img = nullptr;
    int* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_img, size_t(size_t(h) * w) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_out, size_t(size_t(h) * w) * sizeof(int)));
        TRY(cudaMemcpy(d_img, img, size_t(size_t(h) * w) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        const dim3 block(32, 8);
        const dim3 grid((w + 31) / 32, (h + 7) / 8);
        sobel_kernel<<<grid, block>>>(h, w, d_img, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(size_t(h) * w) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_img);
    cudaFree(d_out);
}
