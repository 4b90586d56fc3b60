#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// Counting sort in three kernels: global-atomic histogram of the keys, exclusive scan of the
// counts, and a fill pass that finds each output position's key among the offsets.
constexpr int KEYS = 1024;

__global__ void count_keys(int n, const int* keys, int* count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&count[keys[i]], 1);
}

// Exclusive scan of the KEYS counts in place by one block of KEYS threads (Hillis-Steele).
__global__ void scan_counts(int* count) {
    __shared__ int s[KEYS];
    int t = threadIdx.x;
    int c = count[t];
    s[t] = c;
    __syncthreads();
    for (int off = 1; off < KEYS; off <<= 1) {
        int v = t >= off ? s[t - off] : 0;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    count[t] = s[t] - c;
}

// Output position i holds the largest key k with offset[k] <= i (empty keys share their successor's
// offset, so the largest such k is the one whose run contains i).
__global__ void fill_sorted(int n, const int* __restrict__ offset, int* __restrict__ sorted) {
    __shared__ int off[KEYS];
    for (int k = threadIdx.x; k < KEYS; k += blockDim.x) off[k] = offset[k];
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int lo = 0, hi = KEYS;
        while (hi - lo > 1) {
            int mid = (lo + hi) >> 1;
            if (off[mid] <= i) lo = mid;
            else hi = mid;
        }
        sorted[i] = lo;
    }
}

static cudaError_t run_sort(int n, const int* keys, int* sorted, int* count) {
    count_keys<<<(n + 255) / 256, 256>>>(n, keys, count);
    CK(cudaGetLastError());
    scan_counts<<<1, KEYS>>>(count);
    CK(cudaGetLastError());
    fill_sorted<<<1024, 256>>>(n, count, sorted);
    return cudaGetLastError();
}

extern "C" void counting_sort_keys_i32(int n, const int* keys, int* sorted) {
    int *dk = nullptr, *ds = nullptr, *dcount = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dk, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&ds, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dcount, static_cast<size_t>(KEYS) * sizeof(int)));
        CUDA_TRY(cudaMemcpy(dk, keys, static_cast<size_t>(n) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemset(dcount, 0, static_cast<size_t>(KEYS) * sizeof(int)));
        CUDA_TRY(run_sort(n, dk, ds, dcount));
        CUDA_TRY(cudaMemcpy(sorted, ds, static_cast<size_t>(n) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dk);
    cudaFree(ds);
    cudaFree(dcount);
}
