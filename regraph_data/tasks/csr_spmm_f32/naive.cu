#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per row of A, looping over the dense columns and the row's non-zeros.
__global__ void spmm_row(int rows, int ncols, const int* row_ptr, const int* col_idx, const float* vals,
                         const float* B, float* C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int j = 0; j < ncols; ++j) {
        float acc = 0.0f;
        for (int p = row_ptr[r]; p < row_ptr[r + 1]; ++p) acc += vals[p] * B[static_cast<size_t>(col_idx[p]) * ncols + j];
        C[static_cast<size_t>(r) * ncols + j] = acc;
    }
}

extern "C" void csr_spmm_f32(int rows, int cols, int ncols, int nnz, const int* row_ptr, const int* col_idx,
                             const float* vals, const float* B, float* C) {
    int *drp = nullptr, *dci = nullptr;
    float *dv = nullptr, *dB = nullptr, *dC = nullptr;
    size_t bytesB = static_cast<size_t>(cols) * ncols * sizeof(float);
    size_t bytesC = static_cast<size_t>(rows) * ncols * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(rows) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(nnz > 0 ? nnz : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dv, static_cast<size_t>(nnz > 0 ? nnz : 1) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dB, bytesB > 0 ? bytesB : 4));
        CUDA_TRY(cudaMalloc(&dC, bytesC > 0 ? bytesC : 4));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(rows) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(nnz) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dv, vals, static_cast<size_t>(nnz) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dB, B, bytesB, cudaMemcpyHostToDevice));
        if (rows > 0 && ncols > 0) spmm_row<<<(rows + 127) / 128, 128>>>(rows, ncols, drp, dci, dv, dB, dC);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(C, dC, bytesC, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dci);
    cudaFree(dv);
    cudaFree(dB);
    cudaFree(dC);
}
