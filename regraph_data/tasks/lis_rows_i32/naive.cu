#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXLEN = 256;

// One thread per row: patience sorting with a binary search over the tails array.
__global__ void lis_kernel(int rows, int len, const int* a, int* out) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const int* row = a + (size_t)r * len;
    int tails[MAXLEN];
    int size = 0;
    for (int i = 0; i < len; ++i) {
        const int v = row[i];
        int lo = 0, hi = size;  // first position with tails[pos] >= v
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (tails[mid] < v) lo = mid + 1; else hi = mid;
        }
        tails[lo] = v;
        size += lo == size;
    }
    out[r] = size;
}

extern "C" void lis_rows_i32(int rows, int len, const int* a, int* out) {
    int* d_a = nullptr;
    int* d_out = nullptr;
    const size_t n = size_t(rows) * size_t(len);
    do {
        if (len > MAXLEN) break;
        TRY(cudaMalloc(&d_a, n * sizeof(int)));
        TRY(cudaMalloc(&d_out, size_t(rows) * sizeof(int)));
        TRY(cudaMemcpy(d_a, a, n * sizeof(int), cudaMemcpyHostToDevice));
        lis_kernel<<<(rows + 127) / 128, 128>>>(rows, len, d_a, d_out);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(out, d_out, size_t(rows) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_a);
    cudaFree(d_out);
}
