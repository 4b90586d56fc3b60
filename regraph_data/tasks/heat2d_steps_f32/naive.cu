#include <cuda_runtime.h>
#include <cstddef>
#include <utility>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per grid point and one launch per time step; boundary points copy their value.
__global__ void heat_step(int ny, int nx, float r, const float* in, float* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t i = static_cast<size_t>(y) * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        out[i] = in[i];
        return;
    }
    float c = in[i];
    out[i] = c + r * (in[i - nx] + in[i + nx] + in[i + 1] + in[i - 1] - 4.0f * c);
}

extern "C" void heat2d_steps_f32(int ny, int nx, int steps, float r, float* u) {
    float *d0 = nullptr, *d1 = nullptr;
    size_t bytes = static_cast<size_t>(ny) * nx * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&d0, bytes));
        CUDA_TRY(cudaMalloc(&d1, bytes));
        CUDA_TRY(cudaMemcpy(d0, u, bytes, cudaMemcpyHostToDevice));
        float* src = d0;
        float* dst = d1;
        bool ok = true;
        dim3 block(32, 8), grid((nx + 31) / 32, (ny + 7) / 8);
        for (int s = 0; s < steps && ok; ++s) {
            heat_step<<<grid, block>>>(ny, nx, r, src, dst);
            ok = cudaGetLastError() == cudaSuccess;
            std::swap(src, dst);
        }
        if (!ok) break;
        CUDA_TRY(cudaMemcpy(u, src, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d0);
    cudaFree(d1);
}
