#include <cuda_runtime.h>
#include <cstddef>
#include <utility>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void init_labels(int n, int* label) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v < n) label[v] = v;
}

// Synchronous label propagation: new label = min of own and neighbours' old labels.
__global__ void propagate(int n, const int* row_ptr, const int* col_idx, const int* in, int* out, int* changed) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    int best = in[v];
    for (int p = row_ptr[v]; p < row_ptr[v + 1]; ++p) best = min(best, in[col_idx[p]]);
    out[v] = best;
    if (best != in[v]) *changed = 1;
}

extern "C" void cc_label_prop_i32(int n, int m, const int* row_ptr, const int* col_idx, int* label) {
    int *drp = nullptr, *dci = nullptr, *dl = nullptr, *dl2 = nullptr, *dflag = nullptr;
    do {
        if (n <= 0) break;
        CUDA_TRY(cudaMalloc(&drp, (static_cast<size_t>(n) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dci, static_cast<size_t>(m > 0 ? m : 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dl, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dl2, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dflag, sizeof(int)));
        CUDA_TRY(cudaMemcpy(drp, row_ptr, (static_cast<size_t>(n) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dci, col_idx, static_cast<size_t>(m) * sizeof(int), cudaMemcpyHostToDevice));
        int blocks = (n + 255) / 256;
        bool ok = true;
        init_labels<<<blocks, 256>>>(n, dl);
        int changed = 1;
        while (changed && ok) {
            ok = cudaMemset(dflag, 0, sizeof(int)) == cudaSuccess;
            propagate<<<blocks, 256>>>(n, drp, dci, dl, dl2, dflag);
            ok = ok && cudaGetLastError() == cudaSuccess;
            std::swap(dl, dl2);
            ok = ok && cudaMemcpy(&changed, dflag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
        }
        if (!ok) break;
        CUDA_TRY(cudaMemcpy(label, dl, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(drp);
    cudaFree(dci);
    cudaFree(dl);
    cudaFree(dl2);
    cudaFree(dflag);
}
