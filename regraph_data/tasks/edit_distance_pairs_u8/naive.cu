#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXLEN = 128;

// One thread per pair; a single DP row (len + 1 cells) in a per-thread array, updated in place with the
// diagonal value carried in a register.
__global__ void ed_kernel(int npairs, int len, const unsigned char* a, const unsigned char* b, int* dist) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npairs) return;
    const unsigned char* s = a + (size_t)p * len;
    const unsigned char* t = b + (size_t)p * len;
    int row[MAXLEN + 1];
    for (int j = 0; j <= len; ++j) row[j] = j;
    for (int i = 1; i <= len; ++i) {
        int diag = row[0];
        row[0] = i;
        const unsigned char si = s[i - 1];
        for (int j = 1; j <= len; ++j) {
            const int up = row[j];
            row[j] = min(min(up + 1, row[j - 1] + 1), diag + (si != t[j - 1] ? 1 : 0));
            diag = up;
        }
    }
    dist[p] = row[len];
}

extern "C" void edit_distance_pairs_u8(int npairs, int len, const unsigned char* a, const unsigned char* b, int* dist) {
    unsigned char* d_a = nullptr;
    unsigned char* d_b = nullptr;
    int* d_dist = nullptr;
    do {
        TRY(cudaMalloc(&d_a, size_t(size_t(npairs) * len) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_b, size_t(size_t(npairs) * len) * sizeof(unsigned char)));
        TRY(cudaMalloc(&d_dist, size_t(npairs) * sizeof(int)));
        TRY(cudaMemcpy(d_a, a, size_t(size_t(npairs) * len) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_b, b, size_t(size_t(npairs) * len) * sizeof(unsigned char), cudaMemcpyHostToDevice));
        if (len > MAXLEN) break;
        ed_kernel<<<(npairs + 127) / 128, 128>>>(npairs, len, d_a, d_b, d_dist);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(dist, d_dist, size_t(npairs) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_dist);
}
