#include <cuda_runtime.h>
#include <cfloat>
#include <climits>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

// Total order used everywhere: larger value first, then smaller column index.
__device__ __forceinline__ bool better(float v1, int i1, float v2, int i2) {
    return v1 > v2 || (v1 == v2 && i1 < i2);
}

// Insert (x, c) into a best-first list of length k, dropping the worst entry.
__device__ void insert_dyn(float* lv, int* li, int k, float x, int c) {
    if (!better(x, c, lv[k - 1], li[k - 1])) return;
    int t = k - 1;
    while (t > 0 && better(x, c, lv[t - 1], li[t - 1])) {
        lv[t] = lv[t - 1];
        li[t] = li[t - 1];
        --t;
    }
    lv[t] = x;
    li[t] = c;
}

// One thread per row keeps a sorted top-k list (insertion) while scanning its row.
__global__ void topk_thread(int rows, int cols, int k, const float* x, float* vals, int* idx) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float lv[32];
    int li[32];
    for (int t = 0; t < k; ++t) { lv[t] = -FLT_MAX; li[t] = INT_MAX; }
    const float* row = x + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) insert_dyn(lv, li, k, row[c], c);
    for (int t = 0; t < k; ++t) {
        vals[static_cast<size_t>(r) * k + t] = lv[t];
        idx[static_cast<size_t>(r) * k + t] = li[t];
    }
}

extern "C" void topk_rows_f32(int rows, int cols, int k, const float* x, float* vals, int* idx) {
    float *dx = nullptr, *dv = nullptr;
    int* di = nullptr;
    size_t nx = static_cast<size_t>(rows) * cols, nk = static_cast<size_t>(rows) * k;
    do {
        if (k < 1 || k > 32 || k > cols) break;
        CUDA_TRY(cudaMalloc(&dx, nx * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dv, nk * sizeof(float)));
        CUDA_TRY(cudaMalloc(&di, nk * sizeof(int)));
        CUDA_TRY(cudaMemcpy(dx, x, nx * sizeof(float), cudaMemcpyHostToDevice));
        if (rows > 0) topk_thread<<<(rows + 127) / 128, 128>>>(rows, cols, k, dx, dv, di);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(vals, dv, nk * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_TRY(cudaMemcpy(idx, di, nk * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dv);
    cudaFree(di);
}
