// Rank sort: thread i counts the keys smaller than its key, plus the equal keys at smaller indices,
// and stores its key at that rank (a permutation, so every slot is written exactly once). All keys
// stream through shared memory in tiles of blockDim.x, which every thread of the block compares
// against; threads past the end still load tiles and reach the barriers.

#define MAX_BLOCK 1024

extern "C" __global__ void rank_sort_kernel(int n, const int* __restrict__ keys, int* __restrict__ sorted) {
    __shared__ int tile[MAX_BLOCK];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int key = i < n ? keys[i] : 0;
    int rank = 0;
    for (int base = 0; base < n; base += blockDim.x) {
        const int j = base + threadIdx.x;
        tile[threadIdx.x] = j < n ? keys[j] : 0;
        __syncthreads();
        const int count = min(static_cast<int>(blockDim.x), n - base);
        if (base + count <= i) {
            // The whole tile lies before i: equal keys count too.
            for (int q = 0; q < count; ++q) rank += tile[q] <= key;
        } else if (base > i) {
            for (int q = 0; q < count; ++q) rank += tile[q] < key;
        } else {
            for (int q = 0; q < count; ++q) rank += (tile[q] < key) | ((tile[q] == key) & (base + q < i));
        }
        __syncthreads();
    }
    if (i < n) sorted[rank] = key;
}
