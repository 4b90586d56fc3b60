#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per row; the column-major slot layout already makes a warp's loads of slot k contiguous.
__global__ void ell_spmv(int rows, int K, const int* ell_col, const float* ell_val, const float* x, float* y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        size_t slot = static_cast<size_t>(k) * rows + r;
        int c = ell_col[slot];
        if (c >= 0) acc += ell_val[slot] * x[c];
    }
    y[r] = acc;
}

static cudaError_t run_spmv(int rows, int K, const int* ell_col, const float* ell_val, const float* x, float* y) {
    ell_spmv<<<(rows + 255) / 256, 256>>>(rows, K, ell_col, ell_val, x, y);
    return cudaGetLastError();
}

extern "C" void ell_spmv_f32(int rows, int cols, int K, const int* ell_col, const float* ell_val, const float* x,
                             float* y) {
    int* dc = nullptr;
    float *dv = nullptr, *dx = nullptr, *dy = nullptr;
    size_t slots = static_cast<size_t>(rows) * K;
    do {
        CUDA_TRY(cudaMalloc(&dc, slots * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dv, slots * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(cols) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dy, static_cast<size_t>(rows) * sizeof(float)));
        CUDA_TRY(cudaMemcpy(dc, ell_col, slots * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dv, ell_val, slots * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(cols) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(run_spmv(rows, K, dc, dv, dx, dy));
        CUDA_TRY(cudaMemcpy(y, dy, static_cast<size_t>(rows) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dc);
    cudaFree(dv);
    cudaFree(dx);
    cudaFree(dy);
}
