// One block per row. Two-pass statistics (mean, then the sum of squared deviations) keep float
// accurate when the mean is large relative to the spread; the row is re-read from L2 each pass.

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Block-wide sum, returned to every thread. `slots` must hold 33 floats. Two barriers suffice for
// back-to-back calls: a slot is rewritten only after the next barrier, which every reader of its
// old value has passed.
__device__ float block_sum(float v, float* slots) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < warps ? slots[lane] : 0.0f;
        w = warp_sum(w);
        if (lane == 0) slots[32] = w;
    }
    __syncthreads();
    const float total = slots[32];
    return total;
}

extern "C" __global__ void layernorm_rows_kernel(int rows, int cols, float eps, const float* __restrict__ x,
                                                 const float* __restrict__ gamma,
                                                 const float* __restrict__ beta, float* __restrict__ y) {
    __shared__ float slots[33];
    const int r = blockIdx.x;
    if (r >= rows) return;  // uniform per block
    const float* in = x + static_cast<long long>(r) * cols;
    float* out = y + static_cast<long long>(r) * cols;

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += in[c];
    const float mean = block_sum(s, slots) / cols;

    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = in[c] - mean;
        q += d * d;
    }
    const float inv = rsqrtf(block_sum(q, slots) / cols + eps);

    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        out[c] = (in[c] - mean) * inv * gamma[c] + beta[c];
}
