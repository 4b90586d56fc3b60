#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// One thread per vertex: for each out-neighbour u, merge-intersect the rest of N+(v) with N+(u).
__global__ void tc_vertex(int n, const int* row_ptr, const int* col_idx, int* count) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    int c = 0, ve = row_ptr[v + 1];
    for (int p = row_ptr[v]; p < ve; ++p) {
        int u = col_idx[p];
        int i = p + 1, j = row_ptr[u], ue = row_ptr[u + 1];
        while (i < ve && j < ue) {
            int a = col_idx[i], b = col_idx[j];
            c += (a == b);
            i += (a <= b);
            j += (b <= a);
        }
    }
    count[v] = c;
}

extern "C" void triangle_count_csr(int n, int m_cap, const int* row_ptr, const int* col_idx, int* count) {
    int *drp = nullptr, *dci = nullptr, *dcount = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(n) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(m_cap > 0 ? m_cap : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dcount, static_cast<size_t>(n > 0 ? n : 1) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(n) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(m_cap) * sizeof(int), cudaMemcpyHostToDevice));
        if (n > 0) tc_vertex<<<(n + 127) / 128, 128>>>(n, drp, dci, dcount);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(count, dcount, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dci);
    cudaFree(dcount);
}
