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

__device__ __forceinline__ void warp_argmax(float& v, int& i) {
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        float v2 = __shfl_down_sync(0xffffffffu, v, off);
        int i2 = __shfl_down_sync(0xffffffffu, i, off);
        take(v, i, v2, i2);
    }
}

// Block-wide argmax of one candidate per thread; the result is valid in thread 0.
__device__ void block_argmax(float& v, int& i) {
    __shared__ float wv[32];
    __shared__ int wi[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_argmax(v, i);
    if (lane == 0) {
        wv[warp] = v;
        wi[warp] = i;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x >> 5) ? wv[lane] : -FLT_MAX;
        i = lane < (blockDim.x >> 5) ? wi[lane] : INT_MAX;
        warp_argmax(v, i);
    }
}

constexpr int B = 256;

static int num_partials(int n) { return (n + B - 1) / B; }

__global__ void argmax_blocks(int n, const float* x, float* pv, int* pi) {
    int g = blockIdx.x * B + threadIdx.x;
    float v = g < n ? x[g] : -FLT_MAX;
    int i = g < n ? g : INT_MAX;
    block_argmax(v, i);
    if (threadIdx.x == 0) {
        pv[blockIdx.x] = v;
        pi[blockIdx.x] = i;
    }
}

__global__ void argmax_final(int m, const float* pv, const int* pi, int* idx) {
    float v = -FLT_MAX;
    int i = INT_MAX;
    for (int j = threadIdx.x; j < m; j += blockDim.x) take(v, i, pv[j], pi[j]);
    block_argmax(v, i);
    if (threadIdx.x == 0) idx[0] = i;
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
