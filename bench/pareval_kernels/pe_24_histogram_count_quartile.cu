// The first block alone: the fractional part (x minus its integer part) picks one of four bins.
extern "C" __global__ void countQuartiles(const double *x, size_t N, size_t *bins) {
    __shared__ unsigned long long counts[4];
    if (blockIdx.x != 0) return;
    if (threadIdx.x < 4) counts[threadIdx.x] = 0;
    __syncthreads();
    for (size_t i = threadIdx.x; i < N; i += blockDim.x) {
        const double frac = x[i] - (int)x[i];
        const int bin = frac < 0.25 ? 0 : frac < 0.5 ? 1 : frac < 0.75 ? 2 : 3;
        atomicAdd(&counts[bin], 1ULL);
    }
    __syncthreads();
    if (threadIdx.x < 4) bins[threadIdx.x] = counts[threadIdx.x];
}
