#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__device__ __forceinline__ int bin_of(float v) {
    int b = static_cast<int>(v * 256.0f);
    return b < 0 ? 0 : (b > 255 ? 255 : b);
}

// Pass 1: one thread per pixel, atomicAdd straight into the global histogram.
__global__ void histogram(int n, const float* img, unsigned int* hist) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[bin_of(img[i])], 1u);
}

// One thread builds the table: 256 steps of scan plus division, negligible next to the n-pixel passes.
__global__ void build_lut(int n, const unsigned int* hist, int* lut) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    long long cdf[256], run = 0, cdf_min = 0;
    for (int b = 0; b < 256; ++b) {
        run += hist[b];
        cdf[b] = run;
        if (cdf_min == 0 && run > 0) cdf_min = run;
    }
    long long d = static_cast<long long>(n) - cdf_min;
    for (int b = 0; b < 256; ++b) {
        long long num = cdf[b] - cdf_min;
        if (num < 0) num = 0;
        lut[b] = d > 0 ? static_cast<int>((num * 255 + d / 2) / d) : 0;
    }
}

__global__ void apply_lut(int n, const float* __restrict__ img, const int* __restrict__ lut, unsigned char* __restrict__ out) {
    __shared__ int s_lut[256];
    s_lut[threadIdx.x] = lut[threadIdx.x];
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = static_cast<unsigned char>(s_lut[bin_of(img[i])]);
}

extern "C" void hist_equalize_f32(int n, const float* img, int* lut, unsigned char* out) {
    float* dimg = nullptr;
    unsigned int* dhist = nullptr;
    int* dlut = nullptr;
    unsigned char* dout = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dimg, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dout, static_cast<size_t>(n)));
        CUDA_TRY(cudaMalloc(&dhist, 256 * sizeof(unsigned int)));
        CUDA_TRY(cudaMalloc(&dlut, 256 * sizeof(int)));
        CUDA_TRY(cudaMemcpy(dimg, img, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dhist, 0, 256 * sizeof(unsigned int)));
        int blocks = (n + 255) / 256;
        if (n > 0) histogram<<<blocks, 256>>>(n, dimg, dhist);
        build_lut<<<1, 1>>>(n, dhist, dlut);
        if (n > 0) apply_lut<<<blocks, 256>>>(n, dimg, dlut, dout);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(lut, dlut, 256 * sizeof(int), cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(out, dout, static_cast<size_t>(n), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dimg);
    cudaFree(dhist);
    cudaFree(dlut);
    cudaFree(dout);
}
