#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per lag, streaming the whole signal from global memory.
__global__ void acf_kernel(int n, int nlag, const float* x, float* r) {
    const int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l >= nlag) return;
    double s = 0.0;
    for (int i = 0; i + l < n; ++i) s += (double)x[i] * (double)x[i + l];
    r[l] = (float)s;
}

extern "C" void autocorr_f32(int n, int nlag, const float* x, float* r) {
    float* d_x = nullptr;
    float* d_r = nullptr;
    do {
        TRY(cudaMalloc(&d_x, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_r, size_t(nlag) * sizeof(float)));
        TRY(cudaMemcpy(d_x, x, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_r, 0, size_t(nlag) * sizeof(float)));
        acf_kernel<<<(nlag + 127) / 128, 128>>>(n, nlag, d_x, d_r);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(r, d_r, size_t(nlag) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_x);
    cudaFree(d_r);
}
