#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per segment.
__global__ void rle_kernel(int nseg, int seglen, const unsigned char* data, int* runs) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nseg) return;
    const unsigned char* p = data + (size_t)s * seglen;
    int count = seglen > 0 ? 1 : 0;
    for (int i = 1; i < seglen; ++i) count += p[i] != p[i - 1];
    runs[s] = count;
}

extern "C" void rle_run_count_i32(int nseg, int seglen, const unsigned char* data, int* runs) {
    unsigned char* d_data = nullptr;
    int* d_runs = nullptr;
    const size_t bytes = size_t(nseg) * size_t(seglen);
    do {
        TRY(cudaMalloc(&d_data, bytes));
        TRY(cudaMalloc(&d_runs, size_t(nseg) * sizeof(int)));
        TRY(cudaMemcpy(d_data, data, bytes, cudaMemcpyHostToDevice));
        rle_kernel<<<(nseg + 255) / 256, 256>>>(nseg, seglen, d_data, d_runs);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(runs, d_runs, size_t(nseg) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_data);
    cudaFree(d_runs);
}
