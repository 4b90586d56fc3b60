// In place, grid-stride: x squared.
extern "C" __global__ void squareEach(int *x, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        x[i] = x[i] * x[i];
    }
}
