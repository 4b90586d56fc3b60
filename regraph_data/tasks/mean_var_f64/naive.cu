#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// Two passes like the reference: a block-tree sum with one atomicAdd per block, then the squared
// deviations from the mean the same way.  work[0] = mean, work[1] = variance, work[2..3] = sums.
constexpr int B = 256;

static int work_doubles() { return 4; }

__device__ double block_sum(double v) {
    __shared__ double s[B];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = B / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    return s[0];
}

__global__ void sum_pass(int n, const double* x, double* work) {
    int i = blockIdx.x * B + threadIdx.x;
    double t = block_sum(i < n ? x[i] : 0.0);
    if (threadIdx.x == 0) atomicAdd(&work[2], t);
}

__global__ void dev_pass(int n, const double* x, double* work) {
    double mean = work[2] / n;
    int i = blockIdx.x * B + threadIdx.x;
    double d = i < n ? x[i] - mean : 0.0;
    double t = block_sum(d * d);
    if (threadIdx.x == 0) atomicAdd(&work[3], t);
}

__global__ void finish(int n, double* work) {
    work[0] = work[2] / n;
    work[1] = work[3] / n;
}

static cudaError_t run_stats(int n, const double* x, double* work) {
    CK(cudaMemset(work, 0, 4 * sizeof(double)));
    int blocks = (n + B - 1) / B;
    sum_pass<<<blocks, B>>>(n, x, work);
    CK(cudaGetLastError());
    dev_pass<<<blocks, B>>>(n, x, work);
    CK(cudaGetLastError());
    finish<<<1, 1>>>(n, work);
    return cudaGetLastError();
}

extern "C" void mean_var_f64(int n, const double* x, double* out) {
    double *dx = nullptr, *dwork = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(n) * sizeof(double)));
        CUDA_TRY(cudaMalloc(&dwork, static_cast<size_t>(work_doubles()) * sizeof(double)));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(n) * sizeof(double), cudaMemcpyHostToDevice));
        CUDA_TRY(run_stats(n, dx, dwork));
        CUDA_TRY(cudaMemcpy(out, dwork, 2 * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dwork);
}
