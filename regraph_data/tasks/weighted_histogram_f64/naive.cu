#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// Same arithmetic as the reference (double subtract, then multiply), so samples land in the same bin.
__device__ __forceinline__ int bin_of(float x, double lo, double scale, int nbins) {
    double t = (static_cast<double>(x) - lo) * scale;
    return t < 0.0 ? 0 : (t >= nbins ? nbins - 1 : static_cast<int>(t));
}

// One thread per sample, atomically adding its weight to the global histogram.
__global__ void hist_global(int n, int nbins, double lo, double scale, const float* x, const double* w, double* hist) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[bin_of(x[i], lo, scale, nbins)], w[i]);
}

static cudaError_t run_histogram(int n, int nbins, double lo, double scale, const float* x, const double* w,
                                 double* hist) {
    hist_global<<<(n + 255) / 256, 256>>>(n, nbins, lo, scale, x, w, hist);
    return cudaGetLastError();
}

extern "C" void weighted_histogram_f64(int n, int nbins, double lo, double hi, const float* x, const double* w,
                                       double* hist) {
    float* dx = nullptr;
    double *dw = nullptr, *dh = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dw, static_cast<size_t>(n) * sizeof(double)));
        CUDA_TRY(cudaMalloc(&dh, static_cast<size_t>(nbins) * sizeof(double)));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dw, w, static_cast<size_t>(n) * sizeof(double), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dh, 0, static_cast<size_t>(nbins) * sizeof(double)));
        CUDA_TRY(run_histogram(n, nbins, lo, nbins / (hi - lo), dx, dw, dh));
        CUDA_TRY(cudaMemcpy(hist, dh, static_cast<size_t>(nbins) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dh);
}
