// One thread per row (grid-stride): y[i] = sum_j A[i][j] * x[j].
extern "C" __global__ void gemv(const double *A, const double *x, double *y, size_t M, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < M; i += (size_t)gridDim.x * blockDim.x) {
        double sum = 0.0;
        for (size_t j = 0; j < N; ++j) sum += A[i * N + j] * x[j];
        y[i] = sum;
    }
}
