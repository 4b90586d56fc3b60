// Inclusive scan by the first block alone: thread t owns the contiguous chunk [t*c, (t+1)*c); it folds
// its chunk, thread 0 scans the chunk totals serially (exclusive), then each thread rescans its chunk
// from its offset. Element i of the scanned sequence is x[i]; it goes to output[i].
__device__ double op(double a, double b) { return a + b; }

extern "C" __global__ void prefixSum(const double *x, double *output, size_t N) {
    __shared__ double offset[1024];
    if (blockIdx.x != 0) return;
    const size_t chunk = (N + blockDim.x - 1) / blockDim.x;
    const size_t begin = threadIdx.x * chunk;
    const size_t end = begin + chunk < N ? begin + chunk : N;
    double acc = 0.0;
    for (size_t i = begin; i < end; ++i) acc = op(acc, x[i]);
    offset[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double run = 0.0;
        for (unsigned t = 0; t < blockDim.x; ++t) {
            const double total = offset[t];
            offset[t] = run;
            run = op(run, total);
        }
    }
    __syncthreads();
    acc = offset[threadIdx.x];
    for (size_t i = begin; i < end; ++i) {
        acc = op(acc, x[i]);
        output[i] = acc;
    }
}
