// One block per chunk. Each warp counts into its own shared-memory histogram (skewed data makes a
// single shared histogram a hot spot for atomics), reading 4 bytes per load when the chunk is
// 4-byte aligned (chunk_len % 4 == 0); the warp histograms are then summed and every bin written.

#define BINS 256
#define MAX_WARPS 32

extern "C" __global__ void byte_hist_chunks_kernel(int chunks, int chunk_len, const unsigned char* __restrict__ data,
                                                   int* __restrict__ hist) {
    __shared__ int warp_hist[MAX_WARPS][BINS];
    const int ch = blockIdx.x;
    if (ch >= chunks) return;  // uniform per block
    const int warps = (blockDim.x + 31) >> 5;
    for (int e = threadIdx.x; e < warps * BINS; e += blockDim.x) warp_hist[e / BINS][e % BINS] = 0;
    __syncthreads();

    int* mine = warp_hist[threadIdx.x >> 5];
    const unsigned char* d = data + static_cast<long long>(ch) * chunk_len;
    if ((chunk_len & 3) == 0) {
        const unsigned int* d4 = reinterpret_cast<const unsigned int*>(d);
        for (int i = threadIdx.x; i < chunk_len / 4; i += blockDim.x) {
            const unsigned int w = d4[i];
            atomicAdd(&mine[w & 0xffu], 1);
            atomicAdd(&mine[(w >> 8) & 0xffu], 1);
            atomicAdd(&mine[(w >> 16) & 0xffu], 1);
            atomicAdd(&mine[w >> 24], 1);
        }
    } else {
        for (int i = threadIdx.x; i < chunk_len; i += blockDim.x) atomicAdd(&mine[d[i]], 1);
    }
    __syncthreads();

    int* out = hist + static_cast<long long>(ch) * BINS;
    for (int v = threadIdx.x; v < BINS; v += blockDim.x) {
        int total = 0;
        for (int w = 0; w < warps; ++w) total += warp_hist[w][v];
        out[v] = total;
    }
}
