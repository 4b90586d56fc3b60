// One thread per element (grid-stride): its rank is the number of smaller elements plus the number of
// equal elements before it (equal values ranked in index order, as a stable sort places them).
extern "C" __global__ void ranks(const float *x, size_t *ranks, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        const float v = x[i];
        size_t r = 0;
        for (size_t j = 0; j < N; ++j) r += (x[j] < v) || (x[j] == v && j < i);
        ranks[i] = r;
    }
}
