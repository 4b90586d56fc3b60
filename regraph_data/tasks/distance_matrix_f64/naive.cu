#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per matrix entry.
__global__ void dist_kernel(int m, int n, int dim, const double* a, const double* b, double* d) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n) return;
    double s = 0.0;
    for (int k = 0; k < dim; ++k) {
        const double t = a[(size_t)i * dim + k] - b[(size_t)j * dim + k];
        s += t * t;
    }
    d[(size_t)i * n + j] = sqrt(s);
}

extern "C" void distance_matrix_f64(int m, int n, int dim, const double* a, const double* b, double* d) {
    double* d_a = nullptr;
    double* d_b = nullptr;
    double* d_d = nullptr;
    do {
        TRY(cudaMalloc(&d_a, size_t(m) * dim * sizeof(double)));
        TRY(cudaMalloc(&d_b, size_t(n) * dim * sizeof(double)));
        TRY(cudaMalloc(&d_d, size_t(m) * n * sizeof(double)));
        TRY(cudaMemcpy(d_a, a, size_t(m) * dim * sizeof(double), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_b, b, size_t(n) * dim * sizeof(double), cudaMemcpyHostToDevice));
        dist_kernel<<<dim3((n + 15) / 16, (m + 15) / 16), dim3(16, 16)>>>(m, n, dim, d_a, d_b, d_d);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(d, d_d, size_t(m) * n * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_d);
}
