// In place, grid-stride: halve evens, negate odds.
extern "C" __global__ void negateOddsAndHalveEvens(int *x, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        x[i] = x[i] % 2 == 0 ? x[i] / 2 : -x[i];
    }
}
