// The first block alone: shared counters zeroed by the block, shared atomics over a strided pass,
// then every bin written.
extern "C" __global__ void pixelCounts(const int *image, size_t N, size_t *bins) {
    __shared__ unsigned long long counts[256];
    if (blockIdx.x != 0) return;
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) counts[b] = 0;
    __syncthreads();
    for (size_t i = threadIdx.x; i < N; i += blockDim.x) atomicAdd(&counts[image[i]], 1ULL);
    __syncthreads();
    for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) bins[b] = counts[b];
}
