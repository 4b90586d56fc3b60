#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per grid point reading its 9 neighbours from global memory.
__global__ void laplacian_naive(int ny, int nx, double scale, const double* u, double* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    size_t i = static_cast<size_t>(y) * nx + x;
    if (y == 0 || x == 0 || y == ny - 1 || x == nx - 1) {
        out[i] = 0.0;
        return;
    }
    double edges = u[i - nx] + u[i + nx] + u[i - 1] + u[i + 1];
    double corners = u[i - nx - 1] + u[i - nx + 1] + u[i + nx - 1] + u[i + nx + 1];
    out[i] = (4.0 * edges + corners - 20.0 * u[i]) * scale;
}

static cudaError_t run_laplacian(int ny, int nx, double h, const double* u, double* out) {
    dim3 block(32, 8);
    dim3 grid((nx + 31) / 32, (ny + 7) / 8);
    laplacian_naive<<<grid, block>>>(ny, nx, 1.0 / (6.0 * h * h), u, out);
    return cudaGetLastError();
}

extern "C" void laplacian9_2d_f64(int ny, int nx, double h, const double* u, double* out) {
    double *du = nullptr, *dout = nullptr;
    size_t bytes = static_cast<size_t>(ny) * nx * sizeof(double);
    do {
        CUDA_TRY(cudaMalloc(&du, bytes));
        CUDA_TRY(cudaMalloc(&dout, bytes));
        CUDA_TRY(cudaMemcpy(du, u, bytes, cudaMemcpyHostToDevice));
        CUDA_TRY(run_laplacian(ny, nx, h, du, dout));
        CUDA_TRY(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(du);
    cudaFree(dout);
}
