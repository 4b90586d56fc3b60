// Each block stages its slice of x plus a 3-element halo on each side in shared memory (clamped at
// the array ends), so every input is read from global memory about once; the 7 weights sit in
// registers.

#define RADIUS 3
#define MAX_BLOCK 1024

__device__ __forceinline__ int clamp_index(int k, int n) { return k < 0 ? 0 : (k > n - 1 ? n - 1 : k); }

extern "C" __global__ void stencil1d_kernel(int n, const float* __restrict__ x, const float* __restrict__ w,
                                            float* __restrict__ y) {
    __shared__ float tile[MAX_BLOCK + 2 * RADIUS];
    const int start = blockIdx.x * blockDim.x;
    const int t = threadIdx.x;
    const int i = start + t;
    // Threads past the end still load (clamped) and reach the barrier.
    tile[t + RADIUS] = x[clamp_index(i, n)];
    if (t < RADIUS) {
        tile[t] = x[clamp_index(start - RADIUS + t, n)];
        tile[blockDim.x + RADIUS + t] = x[clamp_index(start + blockDim.x + t, n)];
    }
    float wr[2 * RADIUS + 1];
#pragma unroll
    for (int j = 0; j < 2 * RADIUS + 1; ++j) wr[j] = w[j];
    __syncthreads();
    if (i < n) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 2 * RADIUS + 1; ++j) s += wr[j] * tile[t + j];
        y[i] = s;
    }
}
