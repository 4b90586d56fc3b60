#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// Same arithmetic as the reference (double product, clamped), so every point lands in the same bin.
__device__ __forceinline__ int bin_of(float v, int nb) {
    double t = static_cast<double>(v) * nb;
    return t < 0.0 ? 0 : (t >= nb ? nb - 1 : static_cast<int>(t));
}

// One thread per point, one global atomic increment.
__global__ void hist2d_global(int n, int nb, const float* x, const float* y, unsigned int* hist) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[bin_of(y[i], nb) * nb + bin_of(x[i], nb)], 1u);
}

static cudaError_t run_hist(int n, int nb, const float* x, const float* y, unsigned int* hist) {
    hist2d_global<<<(n + 255) / 256, 256>>>(n, nb, x, y, hist);
    return cudaGetLastError();
}

extern "C" void histogram2d_f32(int n, int nb, const float* x, const float* y, unsigned int* hist) {
    float *dx = nullptr, *dy = nullptr;
    unsigned int* dh = nullptr;
    size_t hbytes = static_cast<size_t>(nb) * nb * sizeof(unsigned int);
    do {
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dy, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dh, hbytes));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dy, y, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dh, 0, hbytes));
        CUDA_TRY(run_hist(n, nb, dx, dy, dh));
        CUDA_TRY(cudaMemcpy(hist, dh, hbytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dh);
}
