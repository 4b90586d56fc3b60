#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr unsigned int MOD = 65521u;

// One thread per data block; the sequential recurrence with a modulo per byte.
__global__ void adler_kernel(int nblk, int blen, const unsigned char* data, unsigned int* sum) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const unsigned char* p = data + (size_t)b * blen;
    unsigned int a = 1, s = 0;
    for (int i = 0; i < blen; ++i) {
        a = (a + p[i]) % MOD;
        s = (s + a) % MOD;
    }
    sum[b] = (s << 16) | a;
}

extern "C" void adler32_blocks_u32(int nblk, int blen, const unsigned char* data, unsigned int* sum) {
    unsigned char* d_data = nullptr;
    unsigned int* d_sum = nullptr;
    const size_t bytes = size_t(nblk) * size_t(blen);
    do {
        TRY(cudaMalloc(&d_data, bytes));
        TRY(cudaMalloc(&d_sum, size_t(nblk) * sizeof(unsigned int)));
        TRY(cudaMemcpy(d_data, data, bytes, cudaMemcpyHostToDevice));
        adler_kernel<<<(nblk + 255) / 256, 256>>>(nblk, blen, d_data, d_sum);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(sum, d_sum, size_t(nblk) * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_data);
    cudaFree(d_sum);
}
