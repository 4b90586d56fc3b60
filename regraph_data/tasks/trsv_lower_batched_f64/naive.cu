#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per system: row-oriented forward substitution straight from global memory.
__global__ void trsv_naive(int batch, const double* L, const double* rhs, double* x) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= batch) return;
    const double* m = L + static_cast<size_t>(b) * 1024;
    const double* r = rhs + static_cast<size_t>(b) * 32;
    double* xs = x + static_cast<size_t>(b) * 32;
    for (int i = 0; i < 32; ++i) {
        double s = r[i];
        for (int j = 0; j < i; ++j) s -= m[i * 32 + j] * xs[j];
        xs[i] = s / m[i * 32 + i];
    }
}

extern "C" void trsv_lower_batched_f64(int batch, const double* L, const double* rhs, double* x) {
    double *dL = nullptr, *dr = nullptr, *dx = nullptr;
    size_t bytesL = static_cast<size_t>(batch) * 1024 * sizeof(double);
    size_t bytesV = static_cast<size_t>(batch) * 32 * sizeof(double);
    do {
        CUDA_TRY(cudaMalloc(&dL, bytesL));
        CUDA_TRY(cudaMalloc(&dr, bytesV));
        CUDA_TRY(cudaMalloc(&dx, bytesV));
        CUDA_TRY(cudaMemcpy(dL, L, bytesL, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dr, rhs, bytesV, cudaMemcpyHostToDevice));
        trsv_naive<<<(batch + 127) / 128, 128>>>(batch, dL, dr, dx);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(x, dx, bytesV, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dL);
    cudaFree(dr);
    cudaFree(dx);
}
