// One thread per cell (grid-stride): (up + down + left + right + centre) / 5 with 0 outside.
extern "C" __global__ void jacobi2D(const double *input, double *output, size_t N) {
    for (size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y; i < N; i += (size_t)gridDim.y * blockDim.y) {
        for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < N; j += (size_t)gridDim.x * blockDim.x) {
            double sum = 0.0;
            if (i > 0) sum += input[(i - 1) * N + j];
            if (i + 1 < N) sum += input[(i + 1) * N + j];
            if (j > 0) sum += input[i * N + j - 1];
            if (j + 1 < N) sum += input[i * N + j + 1];
            sum += input[i * N + j];
            output[i * N + j] = sum / 5.0;
        }
    }
}
