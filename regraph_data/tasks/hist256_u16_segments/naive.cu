#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per word: both samples go straight to the segment's bins in global memory.
__global__ void seg_hist(int nseg, int seg_words, const unsigned int* data, int* hist) {
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<size_t>(nseg) * seg_words) return;
    size_t seg = i / seg_words;
    unsigned int w = data[i];
    atomicAdd(&hist[seg * 256 + ((w >> 8) & 0xFF)], 1);
    atomicAdd(&hist[seg * 256 + (w >> 24)], 1);
}

extern "C" void hist256_u16_segments(int nseg, int seg_words, const unsigned int* data, int* hist) {
    unsigned int* dd = nullptr;
    int* dh = nullptr;
    size_t words = static_cast<size_t>(nseg) * seg_words;
    size_t hbytes = static_cast<size_t>(nseg) * 256 * sizeof(int);
    do {
        CUDA_TRY(cudaMalloc(&dd, words * sizeof(unsigned int) + 16));
        CUDA_TRY(cudaMalloc(&dh, hbytes));
        CUDA_TRY(cudaMemcpy(dd, data, words * sizeof(unsigned int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dh, 0, hbytes));
        if (words > 0) seg_hist<<<static_cast<unsigned>((words + 255) / 256), 256>>>(nseg, seg_words, dd, dh);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(hist, dh, hbytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dd);
    cudaFree(dh);
}
