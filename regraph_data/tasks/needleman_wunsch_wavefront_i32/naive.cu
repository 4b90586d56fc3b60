#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per cell of anti-diagonal d.
__global__ void diag_kernel(int n, int m, int d, const unsigned char* a, const unsigned char* b, const int* D0, const int* D1,
                            int* D2, int* last_row) {
    const int i = max(0, d - m) + blockIdx.x * blockDim.x + threadIdx.x;
    if (i > min(n, d)) return;
    const int j = d - i;
    int h;
    if (i == 0) h = -j;
    else if (j == 0) h = -i;
    else h = max(D0[i - 1] + (a[i - 1] == b[j - 1] ? 1 : -1), max(D1[i - 1], D1[i]) - 1);
    D2[i] = h;
    if (i == n) last_row[j] = h;
}

extern "C" void needleman_wunsch_wavefront_i32(int n, int m, const unsigned char* a, const unsigned char* b, int* last_row) {
    unsigned char* d_a = nullptr;
    unsigned char* d_b = nullptr;
    int* d_diag = nullptr;  // three diagonals of n + 1 cells
    int* d_last = nullptr;
    do {
        TRY(cudaMalloc(&d_a, size_t(n)));
        TRY(cudaMalloc(&d_b, size_t(m)));
        TRY(cudaMalloc(&d_diag, size_t(3) * (n + 1) * sizeof(int)));
        TRY(cudaMalloc(&d_last, size_t(m + 1) * sizeof(int)));
        TRY(cudaMemcpy(d_a, a, size_t(n), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_b, b, size_t(m), cudaMemcpyHostToDevice));
        int* D0 = d_diag;
        int* D1 = d_diag + (n + 1);
        int* D2 = d_diag + 2 * (n + 1);
        for (int d = 0; d <= n + m; ++d) {
            const int cells = min(n, d) - max(0, d - m) + 1;
            diag_kernel<<<(cells + 255) / 256, 256>>>(n, m, d, d_a, d_b, D0, D1, D2, d_last);
            int* t = D0; D0 = D1; D1 = D2; D2 = t;
        }
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(last_row, d_last, size_t(m + 1) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_diag);
    cudaFree(d_last);
}


