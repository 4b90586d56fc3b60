#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr double EPS2 = 0.01;

__global__ void kick_drift(int n, double dt, double* pos, double* vel, const double* acc) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= 3 * n) return;
    vel[k] += 0.5 * dt * acc[k];
    pos[k] += dt * vel[k];
}

__global__ void forces(int n, const double* pos, double* acc) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    double ax = 0.0, ay = 0.0, az = 0.0;
    for (int j = 0; j < n; ++j) {
        const double dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
        const double inv = 1.0 / sqrt(dx * dx + dy * dy + dz * dz + EPS2);
        const double s = inv * inv * inv;
        ax += s * dx; ay += s * dy; az += s * dz;
    }
    acc[3 * i] = ax / n; acc[3 * i + 1] = ay / n; acc[3 * i + 2] = az / n;
}

__global__ void kick(int n, double dt, double* vel, const double* acc) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= 3 * n) return;
    vel[k] += 0.5 * dt * acc[k];
}

extern "C" void verlet_step_f64(int n, double dt, double* pos, double* vel, double* acc) {
    double* d_pos = nullptr;
    double* d_vel = nullptr;
    double* d_acc = nullptr;
    const size_t bytes = size_t(3) * size_t(n) * sizeof(double);
    do {
        TRY(cudaMalloc(&d_pos, bytes));
        TRY(cudaMalloc(&d_vel, bytes));
        TRY(cudaMalloc(&d_acc, bytes));
        TRY(cudaMemcpy(d_pos, pos, bytes, cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_vel, vel, bytes, cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_acc, acc, bytes, cudaMemcpyHostToDevice));
        kick_drift<<<(3 * n + 255) / 256, 256>>>(n, dt, d_pos, d_vel, d_acc);
        forces<<<(n + 255) / 256, 256>>>(n, d_pos, d_acc);
        kick<<<(3 * n + 255) / 256, 256>>>(n, dt, d_vel, d_acc);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(pos, d_pos, bytes, cudaMemcpyDeviceToHost));
        TRY(cudaMemcpy(vel, d_vel, bytes, cudaMemcpyDeviceToHost));
        TRY(cudaMemcpy(acc, d_acc, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_pos);
    cudaFree(d_vel);
    cudaFree(d_acc);
}
