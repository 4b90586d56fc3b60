#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// Level-synchronous, vertex-centric: in round `cur` every thread whose vertex is at level cur labels
// its unvisited neighbours cur+1 (racing writers store the same value); the host loops while a
// round changed something.
__global__ void bfs_round(int n, int cur, const int* row_ptr, const int* col_idx, int* level, int* changed) {
    int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= n || level[u] != cur) return;
    for (int j = row_ptr[u]; j < row_ptr[u + 1]; ++j) {
        int v = col_idx[j];
        if (level[v] == -1) {
            level[v] = cur + 1;
            *changed = 1;
        }
    }
}

static cudaError_t run_bfs(int n, const int* row_ptr, const int* col_idx, int* level) {
    int* dchanged = nullptr;
    cudaError_t err = cudaMalloc(&dchanged, sizeof(int));
    for (int cur = 0; err == cudaSuccess; ++cur) {
        int changed = 0;
        if ((err = cudaMemset(dchanged, 0, sizeof(int))) != cudaSuccess) break;
        bfs_round<<<(n + 255) / 256, 256>>>(n, cur, row_ptr, col_idx, level, dchanged);
        if ((err = cudaGetLastError()) != cudaSuccess) break;
        if ((err = cudaMemcpy(&changed, dchanged, sizeof(int), cudaMemcpyDeviceToHost)) != cudaSuccess) break;
        if (!changed) break;
    }
    cudaFree(dchanged);
    return err;
}

extern "C" void bfs_levels_csr(int n, int m, const int* row_ptr, const int* col_idx, int* level) {
    int *drp = nullptr, *dci = nullptr, *dlev = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(n) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(m) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dlev, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(n) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(m) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dlev, 0xFF, static_cast<size_t>(n) * sizeof(int)));  // all -1
        const int zero = 0;
        CUDA_TRY(cudaMemcpy(dlev, &zero, sizeof(int), cudaMemcpyHostToDevice));  // source 0 at level 0
        CUDA_TRY(run_bfs(n, drp, dci, dlev));
        CUDA_TRY(cudaMemcpy(level, dlev, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dci);
    cudaFree(dlev);
}
