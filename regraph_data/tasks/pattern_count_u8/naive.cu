#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXPAT = 16;

// One thread per candidate position; every match is one global atomic.
__global__ void match_kernel(int n, int m, const unsigned char* text, const unsigned char* pat, unsigned long long* count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + m > n) return;
    int k = 0;
    while (k < m && text[i + k] == pat[k]) ++k;
    if (k == m) atomicAdd(count, 1ULL);
}

extern "C" void pattern_count_u8(int n, int m, const unsigned char* text, const unsigned char* pat,
                                 unsigned long long* count) {
    unsigned char* d_text = nullptr;
    unsigned char* d_pat = nullptr;
    unsigned long long* d_count = nullptr;
    do {
        if (m < 1 || m > MAXPAT) break;
        TRY(cudaMalloc(&d_text, size_t(n)));
        TRY(cudaMalloc(&d_pat, size_t(m)));
        TRY(cudaMalloc(&d_count, sizeof(unsigned long long)));
        TRY(cudaMemcpy(d_text, text, size_t(n), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_pat, pat, size_t(m), cudaMemcpyHostToDevice));
        TRY(cudaMemset(d_count, 0, sizeof(unsigned long long)));
        match_kernel<<<(n + 255) / 256, 256>>>(n, m, d_text, d_pat, d_count);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(count, d_count, sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_text);
    cudaFree(d_pat);
    cudaFree(d_count);
}
