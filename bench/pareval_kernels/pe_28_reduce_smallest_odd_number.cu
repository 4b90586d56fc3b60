// The first block alone: the minimum over the odd values (v % 2 == 1; INT_MAX when there is none),
// per thread over strided elements, then a shared-memory tree.
extern "C" __global__ void smallestOdd(const int *x, size_t N, int *smallest) {
    __shared__ int part[1024];
    if (blockIdx.x != 0) return;
    int mine = 2147483647;
    for (size_t i = threadIdx.x; i < N; i += blockDim.x) {
        if (x[i] % 2 == 1 && x[i] < mine) mine = x[i];
    }
    part[threadIdx.x] = mine;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) part[threadIdx.x] = min(part[threadIdx.x], part[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) smallest[0] = part[0];
}
