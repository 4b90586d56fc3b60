#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per pixel in row-major order (a warp covers 32 consecutive pixels of one row).
__global__ void mandel_kernel(int h, int w, int maxit, int* iters) {
    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= (long long)h * w) return;
    const int y = (int)(p / w);
    const int x = (int)(p % w);
    const long long one = 1LL << 28;
    const long long cr = -5 * one / 2 + (long long)x * (7 * one / 2) / w;
    const long long ci = -5 * one / 4 + (long long)y * (5 * one / 2) / h;
    long long zr = 0, zi = 0;
    int it = 0;
    while (it < maxit) {
        const long long zr2 = (zr * zr) >> 28, zi2 = (zi * zi) >> 28;
        if (zr2 + zi2 > 4 * one) break;
        zi = ((zr * zi) >> 27) + ci;
        zr = zr2 - zi2 + cr;
        ++it;
    }
    iters[(size_t)y * w + x] = it;
}

extern "C" void mandelbrot_q28_i32(int h, int w, int maxit, int* iters) {
    int* d_iters = nullptr;
    do {
        TRY(cudaMalloc(&d_iters, size_t(size_t(h) * w) * sizeof(int)));
        const long long npix = (long long)h * w;
        mandel_kernel<<<(unsigned)((npix + 255) / 256), 256>>>(h, w, maxit, d_iters);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(iters, d_iters, size_t(size_t(h) * w) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_iters);
}
