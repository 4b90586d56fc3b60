// z = alpha * x + y, grid-stride.
extern "C" __global__ void axpy(double alpha, const double *x, const double *y, double *z, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        z[i] = alpha * x[i] + y[i];
    }
}
