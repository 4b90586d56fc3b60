#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per particle, brute-force loop over all particles in global memory.
__global__ void density_kernel(int n, float h2, float coef, const float* pos, const float* mass, float* rho) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
        const float r2 = dx * dx + dy * dy + dz * dz;
        if (r2 < h2) { const float d = h2 - r2; acc += mass[j] * d * d * d; }
    }
    rho[i] = coef * acc;
}

extern "C" void sph_density_f32(int n, float h, const float* pos, const float* mass, float* rho) {
    float* d_pos = nullptr;
    float* d_mass = nullptr;
    float* d_rho = nullptr;
    do {
        TRY(cudaMalloc(&d_pos, size_t(3 * size_t(n)) * sizeof(float)));
        TRY(cudaMalloc(&d_mass, size_t(n) * sizeof(float)));
        TRY(cudaMalloc(&d_rho, size_t(n) * sizeof(float)));
        TRY(cudaMemcpy(d_pos, pos, size_t(3 * size_t(n)) * sizeof(float), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_mass, mass, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
        const float h2 = h * h;
        const float coef = 315.0f / (64.0f * 3.14159265358979f * h2 * h2 * h2 * h2 * h);
        density_kernel<<<(n + 255) / 256, 256>>>(n, h2, coef, d_pos, d_mass, d_rho);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(rho, d_rho, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_pos);
    cudaFree(d_mass);
    cudaFree(d_rho);
}
