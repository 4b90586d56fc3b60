// In place, grid-stride: max(0, x).
extern "C" __global__ void relu(double *x, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        x[i] = x[i] > 0.0 ? x[i] : 0.0;
    }
}
