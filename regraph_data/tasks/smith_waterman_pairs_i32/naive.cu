#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXLEN = 64;

// One thread per pair; in-place single-row DP.
__global__ void sw_kernel(int npairs, int len, const unsigned char* a, const unsigned char* b, int* out) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npairs) return;
    const unsigned char* s = a + (size_t)p * len;
    const unsigned char* t = b + (size_t)p * len;
    int row[MAXLEN + 1];
    for (int j = 0; j <= len; ++j) row[j] = 0;
    int best = 0;
    for (int i = 1; i <= len; ++i) {
        int diag = 0;
        const unsigned char si = s[i - 1];
        for (int j = 1; j <= len; ++j) {
            const int up = row[j];
            const int h = max(max(0, diag + (si == t[j - 1] ? 2 : -1)), max(up, row[j - 1]) - 2);
            row[j] = h;
            best = max(best, h);
            diag = up;
        }
    }
    out[p] = best;
}

extern "C" void smith_waterman_pairs_i32(int npairs, int len, const unsigned char* a, const unsigned char* b, int* out) {
    unsigned char* d_a = nullptr;
    unsigned char* d_b = nullptr;
    int* d_out = nullptr;
    const size_t bytes = size_t(npairs) * size_t(len);
    do {
        if (len < 1 || len > MAXLEN) break;
        TRY(cudaMalloc(&d_a, bytes));
        TRY(cudaMalloc(&d_b, bytes));
        TRY(cudaMalloc(&d_out, size_t(npairs) * sizeof(int)));
        TRY(cudaMemcpy(d_a, a, bytes, cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_b, b, bytes, cudaMemcpyHostToDevice));
        sw_kernel<<<(npairs + 127) / 128, 128>>>(npairs, len, d_a, d_b, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(npairs) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_out);
}
