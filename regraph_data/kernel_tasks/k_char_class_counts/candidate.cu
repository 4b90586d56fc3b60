// One block per chunk. Each thread classifies bytes into four register counters (4 bytes per load
// when the chunk is 4-byte aligned, i.e. chunk_len % 4 == 0), then warp shuffles and one shared row
// per warp reduce the counters; threads 0..3 write the chunk's four counts.

__device__ __forceinline__ void classify(unsigned int ch, int& letters, int& digits, int& spaces, int& others) {
    const unsigned int folded = ch | 0x20u;  // maps A-Z onto a-z and leaves a-z unchanged
    if (folded - 'a' < 26u) {
        ++letters;
    } else if (ch - '0' < 10u) {
        ++digits;
    } else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
        ++spaces;
    } else {
        ++others;
    }
}

__device__ __forceinline__ int warp_sum(int v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void char_class_counts_kernel(int chunks, int chunk_len, const unsigned char* __restrict__ text,
                                                    int* __restrict__ counts) {
    __shared__ int warp_counts[32][4];
    const int c = blockIdx.x;
    if (c >= chunks) return;  // uniform per block
    const unsigned char* t = text + static_cast<long long>(c) * chunk_len;
    int letters = 0, digits = 0, spaces = 0, others = 0;
    if ((chunk_len & 3) == 0) {
        const unsigned int* t4 = reinterpret_cast<const unsigned int*>(t);
        for (int i = threadIdx.x; i < chunk_len / 4; i += blockDim.x) {
            const unsigned int w = t4[i];
            classify(w & 0xffu, letters, digits, spaces, others);
            classify((w >> 8) & 0xffu, letters, digits, spaces, others);
            classify((w >> 16) & 0xffu, letters, digits, spaces, others);
            classify(w >> 24, letters, digits, spaces, others);
        }
    } else {
        for (int i = threadIdx.x; i < chunk_len; i += blockDim.x) classify(t[i], letters, digits, spaces, others);
    }
    letters = warp_sum(letters);
    digits = warp_sum(digits);
    spaces = warp_sum(spaces);
    others = warp_sum(others);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_counts[warp][0] = letters;
        warp_counts[warp][1] = digits;
        warp_counts[warp][2] = spaces;
        warp_counts[warp][3] = others;
    }
    __syncthreads();
    if (threadIdx.x < 4) {
        const int warps = (blockDim.x + 31) >> 5;
        int total = 0;
        for (int w = 0; w < warps; ++w) total += warp_counts[w][threadIdx.x];
        counts[4 * c + threadIdx.x] = total;
    }
}
