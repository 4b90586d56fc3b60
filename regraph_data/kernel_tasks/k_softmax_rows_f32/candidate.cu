// One block per row, three passes over the row (the second and third hit L2): block max, block sum
// of exp(x - max), then the normalised write. Block reductions use warp shuffles plus one shared
// slot per warp; the result is broadcast through shared memory.

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Every thread of the block gets the result. `slots` must hold 33 floats. Two barriers suffice for
// back-to-back calls: a slot is rewritten only after the next barrier, which every reader of its
// old value has passed.
__device__ float block_reduce(float v, bool is_max, float* slots) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const float neutral = is_max ? -__int_as_float(0x7f800000) : 0.0f;
        float w = lane < warps ? slots[lane] : neutral;
        w = is_max ? warp_max(w) : warp_sum(w);
        if (lane == 0) slots[32] = w;
    }
    __syncthreads();
    const float result = slots[32];
    return result;
}

extern "C" __global__ void softmax_rows_kernel(int rows, int cols, const float* __restrict__ x,
                                               float* __restrict__ y) {
    __shared__ float slots[33];
    const int r = blockIdx.x;
    if (r >= rows) return;  // uniform per block
    const float* in = x + static_cast<long long>(r) * cols;
    float* out = y + static_cast<long long>(r) * cols;

    float m = -__int_as_float(0x7f800000);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    m = block_reduce(m, true, slots);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(in[c] - m);
    s = block_reduce(s, false, slots);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(in[c] - m) * inv;
}
