// One block per row, walked in tiles of 4 * blockDim.x elements. Each thread owns 4 consecutive
// elements of a tile and scans them serially; a warp-shuffle scan over the threads' totals plus one
// shared slot per warp gives each thread its exclusive offset; a running carry links the tiles.

#define ITEMS 4

__device__ __forceinline__ int warp_inclusive_scan(int v) {
    const int lane = threadIdx.x & 31;
    for (int off = 1; off < 32; off <<= 1) {
        const int up = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += up;
    }
    return v;
}

extern "C" __global__ void row_cumsum_kernel(int rows, int cols, const int* __restrict__ x, int* __restrict__ y) {
    __shared__ int warp_totals[32];
    const int r = blockIdx.x;
    if (r >= rows) return;  // uniform per block
    const int* in = x + static_cast<long long>(r) * cols;
    int* out = y + static_cast<long long>(r) * cols;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    const int tile = ITEMS * blockDim.x;

    int carry = 0;  // sum of all previous tiles, identical in every thread
    for (int base = 0; base < cols; base += tile) {
        const int first = base + ITEMS * threadIdx.x;
        int v[ITEMS];
        int local = 0;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int c = first + k;
            local += c < cols ? in[c] : 0;
            v[k] = local;  // inclusive within the thread
        }
        const int incl = warp_inclusive_scan(local);
        if (lane == 31) warp_totals[warp] = incl;
        __syncthreads();
        if (warp == 0) {
            const int t = lane < warps ? warp_totals[lane] : 0;
            warp_totals[lane] = warp_inclusive_scan(t);
        }
        __syncthreads();
        const int before = carry + (warp > 0 ? warp_totals[warp - 1] : 0) + incl - local;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int c = first + k;
            if (c < cols) out[c] = v[k] + before;
        }
        carry += warp_totals[warps - 1];
        __syncthreads();  // warp_totals is rewritten by the next tile
    }
}
