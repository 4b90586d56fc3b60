// One warp per row: the lanes stride over the row (float4 when rows stay 16-byte aligned, i.e.
// n % 4 == 0), so each warp reads contiguous 512-byte runs; a shuffle reduction finishes the dot
// product. x is small and shared by all rows, so it stays in L1/L2.

extern "C" __global__ void gemv_kernel(int m, int n, const float* __restrict__ a, const float* __restrict__ x,
                                       float* __restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int warps_per_block = blockDim.x >> 5;
    const int i = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    if (i >= m) return;  // whole warps leave together; no block barrier follows
    const float* row = a + static_cast<long long>(i) * n;
    float s = 0.0f;
    if ((n & 3) == 0) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (int j = lane; j < n / 4; j += 32) {
            const float4 av = row4[j];
            const float4 xv = __ldg(x4 + j);
            s += av.x * xv.x + av.y * xv.y + av.z * xv.z + av.w * xv.w;
        }
    } else {
        for (int j = lane; j < n; j += 32) s += row[j] * __ldg(x + j);
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) y[i] = s;
}
