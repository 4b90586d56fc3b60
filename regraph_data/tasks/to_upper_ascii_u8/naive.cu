#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per byte.
__global__ void upper_kernel(long long n, const unsigned char* text, unsigned char* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned char c = text[i];
    out[i] = (c >= 'a' && c <= 'z') ? (unsigned char)(c - 32) : c;
}

extern "C" void to_upper_ascii_u8(long long n, const unsigned char* text, unsigned char* out) {
    unsigned char* d_text = nullptr;
    unsigned char* d_out = nullptr;
    do {
        TRY(cudaMalloc(&d_text, size_t(n) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_out, size_t(n) * sizeof(unsigned char)));
        TRY(cudaMemcpy(d_text, text, size_t(n) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        upper_kernel<<<(unsigned)((n + 255) / 256), 256>>>(n, d_text, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(n) * sizeof(unsigned char), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_text);
    cudaFree(d_out);
}
