#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr float EPS2 = 0.01f;

// One thread per body, looping over all bodies in global memory.
__global__ void accel_kernel(int n, const float* body, float* acc) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float xi = body[4 * i], yi = body[4 * i + 1], zi = body[4 * i + 2];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float dx = body[4 * j] - xi, dy = body[4 * j + 1] - yi, dz = body[4 * j + 2] - zi;
        const float d2 = dx * dx + dy * dy + dz * dz + EPS2;
        const float inv = 1.0f / sqrtf(d2);
        const float s = body[4 * j + 3] * inv * inv * inv;
        ax += s * dx; ay += s * dy; az += s * dz;
    }
    acc[3 * i] = ax / n; acc[3 * i + 1] = ay / n; acc[3 * i + 2] = az / n;
}

extern "C" void nbody_accel_f32(int n, const float* body, float* acc) {
    float* d_body = nullptr;
    float* d_acc = nullptr;
    do {
        TRY(cudaMalloc(&d_body, size_t(4 * size_t(n)) * sizeof(float)));
        TRY(cudaMalloc(&d_acc, size_t(3 * size_t(n)) * sizeof(float)));
        TRY(cudaMemcpy(d_body, body, size_t(4 * size_t(n)) * sizeof(float), cudaMemcpyHostToDevice));
        accel_kernel<<<(n + 255) / 256, 256>>>(n, d_body, d_acc);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(acc, d_acc, size_t(3 * size_t(n)) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_body);
    cudaFree(d_acc);
}
