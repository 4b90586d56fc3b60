#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

#include <math_constants.h>

__global__ void loss_kernel(int nport, int nscen, int nasset, const float* w, const float* ret, float* loss) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    const int p = blockIdx.y * blockDim.y + threadIdx.y;
    if (p >= nport || s >= nscen) return;
    float dot = 0.0f;
    for (int a = 0; a < nasset; ++a) dot += w[(size_t)p * nasset + a] * ret[(size_t)s * nasset + a];
    loss[(size_t)p * nscen + s] = -dot;
}

__global__ void max_kernel(int nport, int nscen, const float* loss, float* worst) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= nport) return;
    float best = -CUDART_INF_F;
    for (int s = 0; s < nscen; ++s) best = fmaxf(best, loss[(size_t)p * nscen + s]);
    worst[p] = best;
}

extern "C" void portfolio_worst_loss_f32(int nport, int nscen, int nasset, const float* w, const float* ret, float* worst) {
    float* d_w = nullptr;
    float* d_ret = nullptr;
    float* d_worst = nullptr;
    float* d_loss = nullptr;         // nport x nscen losses (unfused versions)
    unsigned int* d_key = nullptr;   // order-preserving encoded maxima (fused versions)
    do {
        TRY(cudaMalloc(&d_w, size_t(nport) * nasset * sizeof(float)));
        TRY(cudaMalloc(&d_ret, size_t(nscen) * nasset * sizeof(float)));
        TRY(cudaMalloc(&d_worst, size_t(nport) * sizeof(float)));
        TRY(cudaMemcpy(d_w, w, size_t(nport) * nasset * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_ret, ret, size_t(nscen) * nasset * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMalloc(&d_loss, size_t(nport) * nscen * sizeof(float)));
        loss_kernel<<<dim3((nscen + 15) / 16, (nport + 15) / 16), dim3(16, 16)>>>(nport, nscen, nasset, d_w, d_ret, d_loss);
        TRY(cudaGetLastError());
        max_kernel<<<(nport + 127) / 128, 128>>>(nport, nscen, d_loss, d_worst);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(worst, d_worst, size_t(nport) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_w);
    cudaFree(d_ret);
    cudaFree(d_worst);
    cudaFree(d_loss);
    cudaFree(d_key);
}
