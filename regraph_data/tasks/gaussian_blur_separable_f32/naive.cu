#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int R = 4;
constexpr int K = 2 * R + 1;

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return min(max(v, lo), hi); }

// One thread per pixel for each pass; the weights come from global memory.
__global__ void row_pass(int h, int w, const float* img, const float* wt, float* tmp) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += wt[k] * img[(size_t)y * w + clampi(x + k - R, 0, w - 1)];
    tmp[(size_t)y * w + x] = acc;
}

__global__ void col_pass(int h, int w, const float* tmp, const float* wt, float* out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += wt[k] * tmp[(size_t)clampi(y + k - R, 0, h - 1) * w + x];
    out[(size_t)y * w + x] = acc;
}

extern "C" void gaussian_blur_separable_f32(int h, int w, const float* img, const float* wt, float* out) {
    const size_t bytes = size_t(h) * size_t(w) * sizeof(float);
    float* d_img = nullptr;
    float* d_tmp = nullptr;
    float* d_out = nullptr;
    float* d_wt = nullptr;
    do {
        TRY(cudaMalloc(&d_img, bytes));
        TRY(cudaMalloc(&d_tmp, bytes));
        TRY(cudaMalloc(&d_out, bytes));
        TRY(cudaMalloc(&d_wt, K * sizeof(float)));
        TRY(cudaMemcpy(d_wt, wt, K * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_img, img, bytes, cudaMemcpyHostToDevice));
        const dim3 block(16, 16);
        const dim3 grid((w + 15) / 16, (h + 15) / 16);
        row_pass<<<grid, block>>>(h, w, d_img, d_wt, d_tmp);
        col_pass<<<grid, block>>>(h, w, d_tmp, d_wt, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_img);
    cudaFree(d_tmp);
    cudaFree(d_out);
    cudaFree(d_wt);
}
