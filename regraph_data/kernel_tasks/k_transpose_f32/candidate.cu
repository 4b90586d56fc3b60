// Tiled transpose through shared memory: a 32 x 32 tile is read with coalesced rows of in and
// written as coalesced rows of out; the extra column of padding keeps the column-wise shared reads
// free of bank conflicts. Each of the 8 thread rows handles 4 tile rows.

#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose_kernel(int rows, int cols, const float* __restrict__ in,
                                            float* __restrict__ out) {
    __shared__ float tile[TILE][TILE + 1];
    const int c0 = blockIdx.x * TILE;
    const int r0 = blockIdx.y * TILE;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    for (int k = 0; k < TILE; k += ROWS) {
        const int r = r0 + ty + k;
        const int c = c0 + tx;
        if (r < rows && c < cols) tile[ty + k][tx] = in[static_cast<long long>(r) * cols + c];
    }
    __syncthreads();
    for (int k = 0; k < TILE; k += ROWS) {
        const int c = c0 + ty + k;  // row of out
        const int r = r0 + tx;      // column of out
        if (r < rows && c < cols) out[static_cast<long long>(c) * rows + r] = tile[tx][ty + k];
    }
}
