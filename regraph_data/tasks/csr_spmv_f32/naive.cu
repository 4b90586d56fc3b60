// Naive CUDA port: scalar CSR, one thread per row.
#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void spmv_scalar(int rows, const int* row_ptr, const int* col_idx, const float* vals, const float* x,
                            float* y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = row_ptr[r]; j < row_ptr[r + 1]; ++j) acc += vals[j] * x[col_idx[j]];
    y[r] = acc;
}

extern "C" void csr_spmv_f32(int rows, int cols, int nnz, const int* row_ptr, const int* col_idx, const float* vals,
                             const float* x, float* y) {
    int *drp = nullptr, *dci = nullptr;
    float *dv = nullptr, *dx = nullptr, *dy = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(rows) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(nnz) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dv, static_cast<size_t>(nnz) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(cols) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dy, static_cast<size_t>(rows) * sizeof(float)));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(rows) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(nnz) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dv, vals, static_cast<size_t>(nnz) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(cols) * sizeof(float), cudaMemcpyHostToDevice));
        spmv_scalar<<<(rows + 255) / 256, 256>>>(rows, drp, dci, dv, dx, dy);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(y, dy, static_cast<size_t>(rows) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dci);
    cudaFree(dv);
    cudaFree(dx);
    cudaFree(dy);
}
