#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per frequency bin; twiddles evaluated per term.
__global__ void dft_kernel(int n, const double* x, double* mag) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    double re = 0.0, im = 0.0;
    for (int j = 0; j < n; ++j) {
        const long long m = ((long long)j * k) % n;
        double s, c;
        sincospi(2.0 * (double)m / (double)n, &s, &c);
        re += x[j] * c;
        im -= x[j] * s;
    }
    mag[k] = sqrt(re * re + im * im);
}

extern "C" void dft_mag_f64(int n, const double* x, double* mag) {
    double* d_x = nullptr;
    double* d_mag = nullptr;
    double* d_tw = nullptr;
    do {
        TRY(cudaMalloc(&d_x, size_t(n) * sizeof(double)));
        TRY(cudaMalloc(&d_mag, size_t(n) * sizeof(double)));
        TRY(cudaMalloc(&d_tw, size_t(n) * sizeof(double) * 2));
        TRY(cudaMemcpy(d_x, x, size_t(n) * sizeof(double), cudaMemcpyHostToDevice));
        dft_kernel<<<(n + 255) / 256, 256>>>(n, d_x, d_mag);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(mag, d_mag, size_t(n) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_x);
    cudaFree(d_mag);
    cudaFree(d_tw);
}
