#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// Cell index and weights of one particle, wrapped periodically exactly as in the reference.
__device__ __forceinline__ void cic(float xp, float inv_dx, int ng, int& i, int& j, float& f) {
    const float s = xp * inv_dx;
    i = (int)floorf(s);
    f = s - (float)i;
    i %= ng;
    if (i < 0) i += ng;
    j = (i + 1 == ng) ? 0 : i + 1;
}

// One thread per particle scattering with global atomics.
__global__ void deposit_global(int np, int ng, float inv_dx, const float* x, const float* q, float* rho) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= np) return;
    int i, j;
    float f;
    cic(x[p], inv_dx, ng, i, j, f);
    atomicAdd(&rho[i], q[p] * (1.0f - f));
    atomicAdd(&rho[j], q[p] * f);
}

extern "C" void pic_deposit_cic_f32(int np, int ng, float inv_dx, const float* x, const float* q, float* rho) {
    float* d_x = nullptr;
    float* d_q = nullptr;
    float* d_rho = nullptr;
    do {
        TRY(cudaMalloc(&d_x, size_t(np) * sizeof(float)));
        TRY(cudaMalloc(&d_q, size_t(np) * sizeof(float)));
        TRY(cudaMalloc(&d_rho, size_t(ng) * sizeof(float)));
        TRY(cudaMemcpy(d_x, x, size_t(np) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_q, q, size_t(np) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_rho, 0, size_t(ng) * sizeof(float)));
        deposit_global<<<(np + 255) / 256, 256>>>(np, ng, inv_dx, d_x, d_q, d_rho);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(rho, d_rho, size_t(ng) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_x);
    cudaFree(d_q);
    cudaFree(d_rho);
}
