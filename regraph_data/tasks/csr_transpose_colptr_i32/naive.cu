#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// Column counts land one slot to the right (col_ptr + 1), so the scan can run in place.
__global__ void count_cols(int nnz, const int* __restrict__ col_idx, int* __restrict__ counts) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < nnz) atomicAdd(&counts[col_idx[p]], 1);
}

// A single thread turns the counts into running sums.
__global__ void scan_serial(int cols, int* cp) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (int c = 1; c <= cols; ++c) cp[c] += cp[c - 1];
}

extern "C" void csr_transpose_colptr_i32(int rows, int cols, int nnz, const int* row_ptr, const int* col_idx,
                                         int* col_ptr) {
    int *dci = nullptr, *dcp = nullptr, *dsums = nullptr;
    (void)row_ptr;  // the non-zeros are exactly col_idx[0 .. nnz)
    do {
        if (cols <= 0) break;
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(nnz > 0 ? nnz : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dcp, (static_cast<size_t>(cols) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dsums, (static_cast<size_t>(cols) / 1024 + 1) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(nnz) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dcp, 0, (static_cast<size_t>(cols) + 1) * sizeof(int)));
        if (nnz > 0) count_cols<<<(nnz + 255) / 256, 256>>>(nnz, dci, dcp + 1);
        scan_serial<<<1, 1>>>(cols, dcp);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(col_ptr, dcp, (static_cast<size_t>(cols) + 1) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dci);
    cudaFree(dcp);
    cudaFree(dsums);
}
