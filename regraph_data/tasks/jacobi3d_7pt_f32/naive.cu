#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per grid point, all seven reads from global memory.
__global__ void jacobi_naive(int nz, int ny, int nx, const float* u, float* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z;
    if (x >= nx || y >= ny) return;
    size_t sy = nx, sz = static_cast<size_t>(nx) * ny;
    size_t i = z * sz + y * sy + x;
    if (z == 0 || y == 0 || x == 0 || z == nz - 1 || y == ny - 1 || x == nx - 1) {
        out[i] = u[i];
        return;
    }
    float nb = u[i - sz] + u[i + sz] + u[i - sy] + u[i + sy] + u[i - 1] + u[i + 1];
    out[i] = 0.4f * u[i] + 0.1f * nb;
}

static cudaError_t run_sweep(int nz, int ny, int nx, const float* u, float* out) {
    dim3 block(32, 8);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8, nz);
    jacobi_naive<<<grid, block>>>(nz, ny, nx, u, out);
    return cudaGetLastError();
}

extern "C" void jacobi3d_7pt_f32(int nz, int ny, int nx, const float* u, float* out) {
    float *du = nullptr, *dout = nullptr;
    size_t bytes = static_cast<size_t>(nz) * ny * nx * sizeof(float);
    do {
        CUDA_TRY(cudaMalloc(&du, bytes));
        CUDA_TRY(cudaMalloc(&dout, bytes));
        CUDA_TRY(cudaMemcpy(du, u, bytes, cudaMemcpyHostToDevice));
        CUDA_TRY(run_sweep(nz, ny, nx, du, dout));
        CUDA_TRY(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(du);
    cudaFree(dout);
}
