#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per particle, looping over all others in global memory.
__global__ void lj_kernel(int n, double rc2, double shift, const double* pos, double* energy) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
    double e = 0.0;
    for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        const double dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
        const double r2 = dx * dx + dy * dy + dz * dz;
        if (r2 < rc2) {
            const double ir6 = 1.0 / (r2 * r2 * r2);
            e += 4.0 * (ir6 * ir6 - ir6) - shift;
        }
    }
    energy[i] = e;
}

extern "C" void lj_energy_f64(int n, double rc, const double* pos, double* energy) {
    double* d_pos = nullptr;
    double* d_energy = nullptr;
    do {
        TRY(cudaMalloc(&d_pos, size_t(3 * size_t(n)) * sizeof(double)));
        TRY(cudaMalloc(&d_energy, size_t(n) * sizeof(double)));
        TRY(cudaMemcpy(d_pos, pos, size_t(3 * size_t(n)) * sizeof(double), cudaMemcpyHostToDevice));
        const double rc2 = rc * rc;
        const double irc6 = 1.0 / (rc2 * rc2 * rc2);
        const double shift = 4.0 * (irc6 * irc6 - irc6);

        lj_kernel<<<(n + 127) / 128, 128>>>(n, rc2, shift, d_pos, d_energy);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(energy, d_energy, size_t(n) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_pos);
    cudaFree(d_energy);
}
