// The first block alone: per thread the first even index among its strided elements (N if none),
// then a shared-memory minimum; N when no element is even, as the serial version returns.
extern "C" __global__ void findFirstEven(const int *x, size_t N, size_t *firstEvenIndex) {
    __shared__ size_t first[1024];
    if (blockIdx.x != 0) return;
    size_t mine = N;
    for (size_t i = threadIdx.x; i < N; i += blockDim.x) {
        if (x[i] % 2 == 0) { mine = i; break; }
    }
    first[threadIdx.x] = mine;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s && first[threadIdx.x + s] < first[threadIdx.x]) first[threadIdx.x] = first[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) firstEvenIndex[0] = first[0];
}
