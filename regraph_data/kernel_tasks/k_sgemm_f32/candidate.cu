// Shared-memory tiled SGEMM with 4 x 4 register blocking. A block computes a 64 x 64 tile of C,
// stepping through k in slices of 16: the 64 x 16 slice of A (stored transposed) and the 16 x 64
// slice of B are staged in shared memory (zero-filled outside the matrices), then each thread
// accumulates rows ty + 16*i and columns tx + 16*j of the tile, which keeps the final stores
// coalesced.

#define BM 64
#define BN 64
#define BK 16
#define THREADS 256

extern "C" __global__ void sgemm_kernel(int m, int n, int k, const float* __restrict__ a,
                                        const float* __restrict__ b, float* __restrict__ c) {
    __shared__ float as[BK][BM + 4];  // as[p][i] = A[row0 + i][k0 + p]
    __shared__ float bs[BK][BN];      // bs[p][j] = B[k0 + p][col0 + j]
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
        for (int l = 0; l < (BM * BK) / THREADS; ++l) {
            const int e = tid + l * THREADS;
            const int i = e / BK;
            const int p = e % BK;
            const int gi = row0 + i;
            const int gp = k0 + p;
            as[p][i] = (gi < m && gp < k) ? a[static_cast<long long>(gi) * k + gp] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < (BK * BN) / THREADS; ++l) {
            const int e = tid + l * THREADS;
            const int p = e / BN;
            const int j = e % BN;
            const int gp = k0 + p;
            const int gj = col0 + j;
            bs[p][j] = (gp < k && gj < n) ? b[static_cast<long long>(gp) * n + gj] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < BK; ++p) {
            float ar[4];
            float br[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) ar[i] = as[p][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) br[j] = bs[p][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += ar[i] * br[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int gi = row0 + ty + 16 * i;
        if (gi >= m) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gj = col0 + tx + 16 * j;
            if (gj < n) c[static_cast<long long>(gi) * n + gj] = acc[i][j];
        }
    }
}
