#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per entry, atomically adding its value to its row (double atomicAdd, sm_60+).
__global__ void row_sums(int nnz, const int* row, const double* val, double* out) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < nnz) atomicAdd(&out[row[e]], val[e]);
}

static cudaError_t run_row_sums(int nnz, const int* row, const double* val, double* out) {
    row_sums<<<(nnz + 255) / 256, 256>>>(nnz, row, val, out);
    return cudaGetLastError();
}

extern "C" void coo_row_sums_f64(int nrows, int nnz, const int* row, const double* val, double* out) {
    int* dr = nullptr;
    double *dv = nullptr, *dout = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dr, static_cast<size_t>(nnz) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dv, static_cast<size_t>(nnz) * sizeof(double)));
        CUDA_TRY(cudaMalloc(&dout, static_cast<size_t>(nrows) * sizeof(double)));
        CUDA_TRY(cudaMemcpy(dr, row, static_cast<size_t>(nnz) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dv, val, static_cast<size_t>(nnz) * sizeof(double), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dout, 0, static_cast<size_t>(nrows) * sizeof(double)));
        CUDA_TRY(run_row_sums(nnz, dr, dv, dout));
        CUDA_TRY(cudaMemcpy(out, dout, static_cast<size_t>(nrows) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dr);
    cudaFree(dv);
    cudaFree(dout);
}
