// Vector CSR: one warp per row. The lanes stride over the row's entries (coalesced reads of vals and
// col_idx, gathered reads of x through the read-only cache) and a shuffle reduction sums them, so
// long rows are spread over 32 lanes while empty rows cost one warp-wide check.

extern "C" __global__ void csr_spmv_kernel(int rows, int cols, int nnz, const int* __restrict__ row_ptr,
                                           const int* __restrict__ col_idx, const float* __restrict__ vals,
                                           const float* __restrict__ x, float* __restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int warps_per_block = blockDim.x >> 5;
    const int i = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    if (i >= rows) return;  // whole warps leave together; no block barrier follows
    const int begin = row_ptr[i];
    const int end = row_ptr[i + 1];
    float s = 0.0f;
    for (int e = begin + lane; e < end; e += 32) s += vals[e] * __ldg(x + col_idx[e]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) y[i] = s;
}
