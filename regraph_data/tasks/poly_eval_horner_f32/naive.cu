#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXDEG = 31;

// One thread per output value.
__global__ void horner_kernel(int npts, int deg, const float* coef, const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int p = blockIdx.y;
    if (i >= npts) return;
    const float* c = coef + (size_t)p * (deg + 1);
    const float xi = x[i];
    float v = c[deg];
    for (int k = deg - 1; k >= 0; --k) v = v * xi + c[k];
    y[(size_t)p * npts + i] = v;
}

extern "C" void poly_eval_horner_f32(int npoly, int npts, int deg, const float* coef, const float* x, float* y) {
    float* d_coef = nullptr;
    float* d_x = nullptr;
    float* d_y = nullptr;
    const size_t ncoef = size_t(npoly) * (deg + 1);
    do {
        if (deg < 0 || deg > MAXDEG) break;
        TRY(cudaMalloc(&d_coef, ncoef * sizeof(float)));
        TRY(cudaMalloc(&d_x, size_t(npts) * sizeof(float)));
        TRY(cudaMalloc(&d_y, size_t(npoly) * npts * sizeof(float)));
        TRY(cudaMemcpy(d_coef, coef, ncoef * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_x, x, size_t(npts) * sizeof(float), cudaMemcpyHostToDevice));
        horner_kernel<<<dim3((npts + 255) / 256, npoly), 256>>>(npts, deg, d_coef, d_x, d_y);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(y, d_y, size_t(npoly) * npts * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_coef);
    cudaFree(d_x);
    cudaFree(d_y);
}
