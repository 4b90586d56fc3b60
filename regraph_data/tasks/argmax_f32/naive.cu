#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

#include <cfloat>
#include <climits>

// (v, i) becomes the better of itself and (v2, i2): larger value, smaller index on ties.
__device__ __forceinline__ void take(float& v, int& i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i)) {
        v = v2;
        i = i2;
    }
}

constexpr int B = 256;

static int num_partials(int n) { return (n + B - 1) / B; }

// Shared-memory tree over one element per thread; each block writes its best (value, index).
__global__ void argmax_blocks(int n, const float* x, float* pv, int* pi) {
    __shared__ float sv[B];
    __shared__ int si[B];
    int g = blockIdx.x * B + threadIdx.x;
    sv[threadIdx.x] = g < n ? x[g] : -FLT_MAX;
    si[threadIdx.x] = g < n ? g : INT_MAX;
    __syncthreads();
    for (int s = B / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) take(sv[threadIdx.x], si[threadIdx.x], sv[threadIdx.x + s], si[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = sv[0];
        pi[blockIdx.x] = si[0];
    }
}

// One block of 1024 threads reduces the per-block candidates.
__global__ void argmax_final(int m, const float* pv, const int* pi, int* idx) {
    __shared__ float sv[1024];
    __shared__ int si[1024];
    float v = -FLT_MAX;
    int i = INT_MAX;
    for (int j = threadIdx.x; j < m; j += blockDim.x) take(v, i, pv[j], pi[j]);
    sv[threadIdx.x] = v;
    si[threadIdx.x] = i;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) take(sv[threadIdx.x], si[threadIdx.x], sv[threadIdx.x + s], si[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) idx[0] = si[0];
}

static cudaError_t run_argmax(int n, int parts, const float* x, float* pv, int* pi, int* idx) {
    argmax_blocks<<<parts, B>>>(n, x, pv, pi);
    CK(cudaGetLastError());
    argmax_final<<<1, 1024>>>(parts, pv, pi, idx);
    return cudaGetLastError();
}

extern "C" void argmax_f32(int n, const float* x, int* idx) {
    float *dx = nullptr, *dpv = nullptr;
    int *dpi = nullptr, *didx = nullptr;
    int parts = num_partials(n);
    do {
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dpv, static_cast<size_t>(parts) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dpi, static_cast<size_t>(parts) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&didx, sizeof(int)));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(run_argmax(n, parts, dx, dpv, dpi, didx));
        CUDA_TRY(cudaMemcpy(idx, didx, sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dpv);
    cudaFree(dpi);
    cudaFree(didx);
}
