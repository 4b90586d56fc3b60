// One block per row. Each thread scans a strided slice (its columns increase, so a strict '>' keeps
// its first maximum); the (value, column) pairs are then combined by warp shuffles and one shared
// slot per warp, preferring the smaller column on equal values.

__device__ __forceinline__ void take_better(float& v, int& c, float ov, int oc) {
    if (ov > v || (ov == v && oc < c)) {
        v = ov;
        c = oc;
    }
}

extern "C" __global__ void row_argmax_kernel(int rows, int cols, const float* __restrict__ a,
                                             int* __restrict__ idx) {
    __shared__ float warp_val[32];
    __shared__ int warp_col[32];
    const int r = blockIdx.x;
    if (r >= rows) return;  // uniform per block
    const float* row = a + static_cast<long long>(r) * cols;
    float best = -__int_as_float(0x7f800000);  // -inf: any finite value beats it
    int col = 0x7fffffff;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = row[c];
        if (v > best) {
            best = v;
            col = c;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_down_sync(0xffffffffu, best, off);
        const int oc = __shfl_down_sync(0xffffffffu, col, off);
        take_better(best, col, ov, oc);
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_val[warp] = best;
        warp_col[warp] = col;
    }
    __syncthreads();
    if (warp == 0) {
        const int warps = (blockDim.x + 31) >> 5;
        best = lane < warps ? warp_val[lane] : -__int_as_float(0x7f800000);
        col = lane < warps ? warp_col[lane] : 0x7fffffff;
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_down_sync(0xffffffffu, best, off);
            const int oc = __shfl_down_sync(0xffffffffu, col, off);
            take_better(best, col, ov, oc);
        }
        if (lane == 0) idx[r] = col;
    }
}
