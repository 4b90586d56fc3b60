#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// Three passes: Hillis-Steele scan of each 256-element block in shared memory, a single thread
// turning the block totals into exclusive offsets, and a pass adding each block's offset.
constexpr int B = 256;

static int num_partials(int n) { return (n + B - 1) / B; }

__global__ void block_scan(int n, const int* x, long long* y, long long* part) {
    __shared__ long long s[B];
    int i = blockIdx.x * B + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0;
    __syncthreads();
    for (int off = 1; off < B; off <<= 1) {
        long long v = threadIdx.x >= off ? s[threadIdx.x - off] : 0;
        __syncthreads();
        s[threadIdx.x] += v;
        __syncthreads();
    }
    if (i < n) y[i] = s[threadIdx.x];
    if (threadIdx.x == B - 1) part[blockIdx.x] = s[B - 1];
}

__global__ void scan_partials_serial(int m, long long* part) {
    long long run = 0;
    for (int b = 0; b < m; ++b) {
        long long v = part[b];
        part[b] = run;
        run += v;
    }
}

__global__ void add_offsets(int n, long long* y, const long long* part) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] += part[blockIdx.x];
}

static cudaError_t run_scan(int n, const int* x, long long* y, long long* part) {
    int blocks = num_partials(n);
    block_scan<<<blocks, B>>>(n, x, y, part);
    CK(cudaGetLastError());
    scan_partials_serial<<<1, 1>>>(blocks, part);
    CK(cudaGetLastError());
    add_offsets<<<blocks, B>>>(n, y, part);
    return cudaGetLastError();
}

extern "C" void inclusive_scan_i32(int n, const int* x, long long* y) {
    int* dx = nullptr;
    long long *dy = nullptr, *dpart = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dx, static_cast<size_t>(n) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dy, static_cast<size_t>(n) * sizeof(long long)));
        CUDA_TRY(cudaMalloc(&dpart, static_cast<size_t>(num_partials(n)) * sizeof(long long)));
        CUDA_TRY(cudaMemcpy(dx, x, static_cast<size_t>(n) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(run_scan(n, dx, dy, dpart));
        CUDA_TRY(cudaMemcpy(y, dy, static_cast<size_t>(n) * sizeof(long long), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dpart);
}
