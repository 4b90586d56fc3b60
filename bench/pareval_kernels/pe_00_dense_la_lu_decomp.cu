// Doolittle LU without pivoting, in place, by the first block alone (the other blocks return):
// step k divides column k below the diagonal and updates the rows below, one row per thread,
// with a barrier between steps. Multiply and subtract are rounded separately (no FMA), as on the host.
extern "C" __global__ void luFactorize(double *A, size_t N) {
    if (blockIdx.x != 0 || blockIdx.y != 0) return;
    const size_t threads = (size_t)blockDim.x * blockDim.y;
    const size_t tid = (size_t)threadIdx.y * blockDim.x + threadIdx.x;
    for (size_t k = 0; k < N; ++k) {
        for (size_t i = k + 1 + tid; i < N; i += threads) {
            const double factor = __ddiv_rn(A[i * N + k], A[k * N + k]);
            A[i * N + k] = factor;
            for (size_t j = k + 1; j < N; ++j) {
                A[i * N + j] = __dsub_rn(A[i * N + j], __dmul_rn(factor, A[k * N + j]));
            }
        }
        __syncthreads();
    }
}
