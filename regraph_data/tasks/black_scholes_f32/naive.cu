#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

__device__ __forceinline__ float cnd(float d) { return 0.5f * erfcf(-d * 0.70710678118654752f); }

// One thread per option; the pricing formula is evaluated exactly as in the reference.
__global__ void bs_kernel(int n, float r, float v, const float* S, const float* K, const float* T, float* call, float* put) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float sqrtT = sqrtf(T[i]);
    const float d1 = (logf(S[i] / K[i]) + (r + 0.5f * v * v) * T[i]) / (v * sqrtT);
    const float d2 = d1 - v * sqrtT;
    const float disc = K[i] * expf(-r * T[i]);
    call[i] = S[i] * cnd(d1) - disc * cnd(d2);
    put[i] = disc * cnd(-d2) - S[i] * cnd(-d1);
}

extern "C" void black_scholes_f32(int n, float r, float v, const float* S, const float* K, const float* T, float* call, float* put) {
    float* d_S = nullptr;
    float* d_K = nullptr;
    float* d_T = nullptr;
    float* d_call = nullptr;
    float* d_put = nullptr;
    do {
        TRY(cudaMalloc(&d_S, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_K, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_T, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_call, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_put, size_t(n) * sizeof(float)));
        TRY(cudaMemcpy(d_S, S, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_K, K, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_T, T, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
        bs_kernel<<<(n + 255) / 256, 256>>>(n, r, v, d_S, d_K, d_T, d_call, d_put);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(call, d_call, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
        TRY(cudaMemcpy(put, d_put, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_S);
    cudaFree(d_K);
    cudaFree(d_T);
    cudaFree(d_call);
    cudaFree(d_put);
}
