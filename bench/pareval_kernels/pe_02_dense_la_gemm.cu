// One thread per element of C (grid-stride in both dimensions): C[i][j] = sum_k A[i][k] * B[k][j].
extern "C" __global__ void gemm(const double *A, const double *B, double *C, size_t M, size_t K, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < M; i += (size_t)gridDim.x * blockDim.x) {
        for (size_t j = blockIdx.y * (size_t)blockDim.y + threadIdx.y; j < N; j += (size_t)gridDim.y * blockDim.y) {
            double sum = 0.0;
            for (size_t k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum;
        }
    }
}
