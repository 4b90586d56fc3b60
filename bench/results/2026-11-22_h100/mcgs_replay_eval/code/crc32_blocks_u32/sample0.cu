#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int CW = 32;  // words (of 4 bytes) staged per data block and round: 128 bytes

__global__ void __launch_bounds__(THREADS) crc_kernel(int nblk, int blen, const unsigned char* __restrict__ data,
                                                      unsigned int* __restrict__ crc) {
    __shared__ unsigned int T[4][256];
    __shared__ unsigned int stage[WARPS][32][CW];
    const int t = threadIdx.x;
    unsigned int e = t;
    for (int k = 0; k < 8; ++k) e = (e >> 1) ^ (0xEDB88320u & (0u - (e & 1u)));
    T[0][t] = e;
    __syncthreads();
    for (int s = 1; s < 4; ++s) {
        T[s][t] = (T[s - 1][t] >> 8) ^ T[0][T[s - 1][t] & 0xFFu];
        __syncthreads();
    }
    const int lane = t & 31, warp = t >> 5;
    const int first = blockIdx.x * THREADS + warp * 32;  // first data block of this warp
    const unsigned int* words = reinterpret_cast<const unsigned int*>(data);
    const size_t wpb = size_t(blen) / 4;
    unsigned int c = 0xFFFFFFFFu;
    for (size_t off = 0; off < wpb; off += CW) {
        for (int r = 0; r < 32; ++r)
            if (first + r < nblk) stage[warp][r][lane] = words[size_t(first + r) * wpb + off + lane];
        __syncwarp();
        for (int k = 0; k < CW; ++k) {
            c ^= stage[warp][lane][k];
            c = T[3][c & 0xFFu] ^ T[2][(c >> 8) & 0xFFu] ^ T[1][(c >> 16) & 0xFFu] ^ T[0][c >> 24];
        }
        __syncwarp();
    }
    if (first + lane < nblk) crc[first + lane] = ~c;
}

extern "C" void crc32_blocks_u32(int nblk, int blen, const unsigned char* data, unsigned int* crc) {
    unsigned char* d_data = nullptr;
    unsigned int* d_crc = nullptr;
    const size_t bytes = size_t(nblk) * size_t(blen);
    do {
        TRY(cudaMalloc(&d_data, bytes));
        TRY(cudaMalloc(&d_crc, size_t(nblk) * sizeof(unsigned int)));
        TRY(cudaMemcpy(d_data, data, bytes, cudaMemcpyHostToDevice));
        crc_kernel<<<(nblk + THREADS - 1) / THREADS, THREADS>>>(nblk, blen, d_data, d_crc);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(crc, d_crc, size_t(nblk) * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_data);
    cudaFree(d_crc);
}
