#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int THREADS = 256;  // one thread per lag: nlag <= 256
constexpr int CHUNK = 2048;   // samples per block

__global__ void __launch_bounds__(THREADS) acf_kernel(int n, int nlag, const float* __restrict__ x, float* __restrict__ r) {
    const int l = threadIdx.x;
    if (l >= nlag) return;
    const int c0 = blockIdx.x * CHUNK;
    const int end = min(c0 + CHUNK, n - l);  // keep i + l < n
    float s = 0.0f;
    for (int i = c0; i < end; ++i) s += x[i] * x[i + l];
    atomicAdd(&r[l], s);
}

extern "C" void autocorr_f32(int n, int nlag, const float* x, float* r) {
    float* d_x = nullptr;
    float* d_r = nullptr;
    do {
        TRY(cudaMalloc(&d_x, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_r, size_t(nlag) * sizeof(float)));
        TRY(cudaMemcpy(d_x, x, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_r, 0, size_t(nlag) * sizeof(float)));
        acf_kernel<<<(n + CHUNK - 1) / CHUNK, THREADS>>>(n, nlag, d_x, d_r);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(r, d_r, size_t(nlag) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_x);
    cudaFree(d_r);
}
