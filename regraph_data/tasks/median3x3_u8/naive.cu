#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per pixel: gather the clamped neighbourhood, insertion-sort it, take the middle.
__global__ void median_kernel(int h, int w, const unsigned char* img, unsigned char* out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int v[9];
    int k = 0;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            const int yy = min(max(y + dy, 0), h - 1);
            const int xx = min(max(x + dx, 0), w - 1);
            v[k++] = img[(size_t)yy * w + xx];
        }
    for (int i = 1; i < 9; ++i) {
        const int key = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > key) { v[j + 1] = v[j]; --j; }
        v[j + 1] = key;
    }
    out[(size_t)y * w + x] = (unsigned char)v[4];
}

extern "C" void median3x3_u8(int h, int w, const unsigned char* img, unsigned char* out) {
    unsigned char* d_img = nullptr;
    unsigned char* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_img, size_t(size_t(h) * w) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_out, size_t(size_t(h) * w) * sizeof(unsigned char)));
        TRY(cudaMemcpy(d_img, img, size_t(size_t(h) * w) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        const dim3 block(32, 8);
        const dim3 grid((w + 31) / 32, (h + 7) / 8);
        median_kernel<<<grid, block>>>(h, w, d_img, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(size_t(h) * w) * sizeof(unsigned char), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_img);
    cudaFree(d_out);
}
