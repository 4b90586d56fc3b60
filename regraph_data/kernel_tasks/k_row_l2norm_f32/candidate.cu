// One block per row: each thread sums squares over a strided slice (float4 when rows stay 16-byte
// aligned, i.e. cols % 4 == 0), then warp shuffles and one shared slot per warp finish the sum.

extern "C" __global__ void row_l2norm_kernel(int rows, int cols, const float* __restrict__ a,
                                             float* __restrict__ norms) {
    __shared__ float warp_sums[32];
    const int r = blockIdx.x;
    if (r >= rows) return;  // uniform per block, so no barrier is skipped by part of a block
    const float* row = a + static_cast<long long>(r) * cols;
    float s = 0.0f;
    if ((cols & 3) == 0) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
            const float4 v = row4[c];
            s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c] * row[c];
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        const int warps = (blockDim.x + 31) >> 5;
        s = lane < warps ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0) norms[r] = sqrtf(s);
    }
}
