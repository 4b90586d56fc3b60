#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per byte, incrementing the global bin with an atomic.
__global__ void hist_kernel(long long n, const unsigned char* data, unsigned int* hist) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i]], 1u);
}

extern "C" void byte_histogram_u8(long long n, const unsigned char* data, unsigned int* hist) {
    unsigned char* d_data = nullptr;
    unsigned int* d_hist = nullptr;
    do {
        TRY(cudaMalloc(&d_data, size_t(n) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_hist, size_t(256) * sizeof(unsigned int)));
        TRY(cudaMemcpy(d_data, data, size_t(n) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_hist, 0, 256 * sizeof(unsigned int)));
        hist_kernel<<<(unsigned)((n + 255) / 256), 256>>>(n, d_data, d_hist);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(hist, d_hist, size_t(256) * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_data);
    cudaFree(d_hist);
}
