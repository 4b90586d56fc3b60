#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per output pixel; the filter is read from global memory.
__global__ void conv3x3_kernel(int h, int w, const float* img, const float* filt, float* out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int i = 0; i < 3; ++i) {
        const int yy = y + i - 1;
        if (yy < 0 || yy >= h) continue;
        for (int j = 0; j < 3; ++j) {
            const int xx = x + j - 1;
            if (xx < 0 || xx >= w) continue;
            acc += filt[i * 3 + j] * img[(size_t)yy * w + xx];
        }
    }
    out[(size_t)y * w + x] = acc;
}

extern "C" void conv2d_3x3_f32(int h, int w, const float* img, const float* filt, float* out) {
    const size_t bytes = size_t(h) * size_t(w) * sizeof(float);
    float* d_img = nullptr;
    float* d_filt = nullptr;
    float* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_img, bytes));
        TRY(cudaMalloc(&d_filt, 9 * sizeof(float)));
        TRY(cudaMalloc(&d_out, bytes));
        TRY(cudaMemcpy(d_img, img, bytes, cudaMemcpyHostToDevice));

        TRY(cudaMemcpy(d_filt, filt, 9 * sizeof(float), cudaMemcpyHostToDevice));
        const dim3 block(16, 16);
        const dim3 grid((w + block.x - 1) / block.x, (h + block.y - 1) / block.y);
        conv3x3_kernel<<<grid, block>>>(h, w, d_img, d_filt, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_img);
    cudaFree(d_filt);
    cudaFree(d_out);
}
