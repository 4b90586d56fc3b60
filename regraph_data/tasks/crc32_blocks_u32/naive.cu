#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per data block; the CRC is computed bit by bit.
__global__ void crc_kernel(int nblk, int blen, const unsigned char* data, unsigned int* crc) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const unsigned char* p = data + (size_t)b * blen;
    unsigned int c = 0xFFFFFFFFu;
    for (int i = 0; i < blen; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    crc[b] = ~c;
}

extern "C" void crc32_blocks_u32(int nblk, int blen, const unsigned char* data, unsigned int* crc) {
    unsigned char* d_data = nullptr;
    unsigned int* d_crc = nullptr;
    const size_t bytes = size_t(nblk) * size_t(blen);
    do {
        TRY(cudaMalloc(&d_data, bytes));
        TRY(cudaMalloc(&d_crc, size_t(nblk) * sizeof(unsigned int)));
        TRY(cudaMemcpy(d_data, data, bytes, cudaMemcpyHostToDevice));
        crc_kernel<<<(nblk + 255) / 256, 256>>>(nblk, blen, d_data, d_crc);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(crc, d_crc, size_t(nblk) * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_data);
    cudaFree(d_crc);
}
