// In place, grid-stride: 1 - 1/x.
extern "C" __global__ void oneMinusInverse(double *x, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        x[i] = 1.0 - 1.0 / x[i];
    }
}
