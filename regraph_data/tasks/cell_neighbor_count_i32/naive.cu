#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int RC = 32768;

// One thread per particle, all pairs.
__global__ void count_kernel(int n, const int* pos, int* count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int x = pos[3 * i], y = pos[3 * i + 1], z = pos[3 * i + 2];
    const long long rc2 = (long long)RC * RC;
    int c = 0;
    for (int j = 0; j < n; ++j) {
        const long long dx = pos[3 * j] - x, dy = pos[3 * j + 1] - y, dz = pos[3 * j + 2] - z;
        c += (j != i) && (dx * dx + dy * dy + dz * dz < rc2);
    }
    count[i] = c;
}

extern "C" void cell_neighbor_count_i32(int n, const int* pos, int* count) {
    int* d_pos = nullptr;
    int* d_count = nullptr;
    do {
        TRY(cudaMalloc(&d_pos, size_t(3) * n * sizeof(int)));
        TRY(cudaMalloc(&d_count, size_t(n) * sizeof(int)));
        TRY(cudaMemcpy(d_pos, pos, size_t(3) * n * sizeof(int), cudaMemcpyHostToDevice));
        count_kernel<<<(n + 255) / 256, 256>>>(n, d_pos, d_count);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(count, d_count, size_t(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_pos);
    cudaFree(d_count);
}
