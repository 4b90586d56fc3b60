#include <cuda_runtime.h>
#include <cstddef>
#include <utility>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per interior point, one launch per time step.
__global__ void heat_step(int n, double r, const double* __restrict__ in, double* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 1 || i >= n - 1) return;
    out[i] = in[i] + r * (in[i - 1] - 2.0 * in[i] + in[i + 1]);
}

extern "C" void heat1d_steps_f64(int n, int steps, double r, double* u) {
    double *d0 = nullptr, *d1 = nullptr;
    size_t bytes = static_cast<size_t>(n) * sizeof(double);
    do {
        if (n <= 0) break;
        CUDA_TRY(cudaMalloc(&d0, bytes));
        CUDA_TRY(cudaMalloc(&d1, bytes));
        CUDA_TRY(cudaMemcpy(d0, u, bytes, cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(d1, d0, bytes, cudaMemcpyDeviceToDevice));  // end points in both buffers
        double* src = d0;
        double* dst = d1;
        bool ok = true;
        for (int s = 0; s < steps && ok; ++s) {
            heat_step<<<(n + 255) / 256, 256>>>(n, r, src, dst);
            ok = cudaGetLastError() == cudaSuccess;
            std::swap(src, dst);
        }
        if (!ok) break;
        CUDA_TRY(cudaMemcpy(u, src, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d0);
    cudaFree(d1);
}
