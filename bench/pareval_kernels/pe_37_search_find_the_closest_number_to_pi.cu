// The first block alone: per thread the smallest |x[i] - pi| over strided i (first index on ties),
// then a shared-memory tree that keeps the smaller distance, or the smaller index on equal distances.
extern "C" __global__ void findClosestToPi(const double *x, size_t N, size_t *closestToPiIndex) {
    __shared__ double dist[1024];
    __shared__ size_t index[1024];
    if (blockIdx.x != 0) return;
    const double pi = 3.14159265358979323846;
    double best = 1.0 / 0.0;
    size_t at = N;
    for (size_t i = threadIdx.x; i < N; i += blockDim.x) {
        const double d = fabs(x[i] - pi);
        if (d < best) { best = d; at = i; }
    }
    dist[threadIdx.x] = best;
    index[threadIdx.x] = at;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) {
            const double d = dist[threadIdx.x + s];
            const size_t k = index[threadIdx.x + s];
            if (d < dist[threadIdx.x] || (d == dist[threadIdx.x] && k < index[threadIdx.x])) {
                dist[threadIdx.x] = d;
                index[threadIdx.x] = k;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) closestToPiIndex[0] = index[0] < N ? index[0] : 0;
}
