#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// Two kernels mirroring the two conceptual stages: full-resolution gray, then 2x2 downscale.
__global__ void gray_kernel(long long npix, const unsigned char* rgb, unsigned char* g) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= npix) return;
    const unsigned char* p = rgb + 3 * i;
    g[i] = (unsigned char)((77 * p[0] + 150 * p[1] + 29 * p[2] + 128) >> 8);
}

__global__ void half_kernel(int h, int w, const unsigned char* g, unsigned char* out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int w2 = w / 2;
    if (x >= w2 || y >= h / 2) return;
    const unsigned char* p = g + (size_t)(2 * y) * w + 2 * x;
    const int s = p[0] + p[1] + p[w] + p[w + 1];
    out[(size_t)y * w2 + x] = (unsigned char)((s + 2) >> 2);
}

extern "C" void rgb_gray_half_u8(int h, int w, const unsigned char* rgb, unsigned char* out) {
    unsigned char* d_rgb = nullptr;
    unsigned char* d_gray = nullptr;
    unsigned char* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_rgb, size_t(size_t(h) * w * 3) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_gray, size_t(size_t(h) * w) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_out, size_t(size_t(h / 2) * (w / 2)) * sizeof(unsigned char)));
        TRY(cudaMemcpy(d_rgb, rgb, size_t(size_t(h) * w * 3) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        const long long npix = (long long)h * w;
        gray_kernel<<<(unsigned)((npix + 255) / 256), 256>>>(npix, d_rgb, d_gray);
        const dim3 block(32, 8);
        const dim3 grid((w / 2 + 31) / 32, (h / 2 + 7) / 8);
        half_kernel<<<grid, block>>>(h, w, d_gray, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(size_t(h / 2) * (w / 2)) * sizeof(unsigned char), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_rgb);
    cudaFree(d_gray);
    cudaFree(d_out);
}
