#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// Binary search for x in the sorted list a[0..len).
__device__ __forceinline__ bool contains(const int* a, int len, int x) {
    int lo = 0, hi = len;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (a[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && a[lo] == x;
}

// One warp per vertex v: lane k takes out-neighbour u = N+(v)[k] (and k+32, ...) and looks every
// w in N+(u) up in the part of N+(v) after u by binary search; partial counts are added atomically.
__global__ void tc_warp(int n, const int* __restrict__ row_ptr, const int* __restrict__ col_idx, int* __restrict__ count) {
    int v = static_cast<int>((static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (v >= n) return;
    int vs = row_ptr[v], dv = row_ptr[v + 1] - vs;
    const int* nv = col_idx + vs;
    int local = 0;
    for (int k = lane; k < dv; k += 32) {
        int u = nv[k];
        for (int p = row_ptr[u]; p < row_ptr[u + 1]; ++p) local += contains(nv + k + 1, dv - k - 1, col_idx[p]);
    }
    if (local) atomicAdd(&count[v], local);
}

extern "C" void triangle_count_csr(int n, int m_cap, const int* row_ptr, const int* col_idx, int* count) {
    int *drp = nullptr, *dci = nullptr, *dcount = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(n) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(m_cap > 0 ? m_cap : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dcount, static_cast<size_t>(n > 0 ? n : 1) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(n) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(m_cap) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dcount, 0, static_cast<size_t>(n) * sizeof(int)));
        if (n > 0) tc_warp<<<static_cast<unsigned>((static_cast<size_t>(n) * 32 + 255) / 256), 256>>>(n, drp, dci, dcount);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(count, dcount, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dci);
    cudaFree(dcount);
}
