// One thread per cell (grid-stride in x: column, y: row): 1 when exactly one of the four neighbours is 1.
extern "C" __global__ void cellsXOR(const int *input, int *output, size_t N) {
    for (size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y; i < N; i += (size_t)gridDim.y * blockDim.y) {
        for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < N; j += (size_t)gridDim.x * blockDim.x) {
            int count = 0;
            if (i > 0 && input[(i - 1) * N + j] == 1) ++count;
            if (i + 1 < N && input[(i + 1) * N + j] == 1) ++count;
            if (j > 0 && input[i * N + j - 1] == 1) ++count;
            if (j + 1 < N && input[i * N + j + 1] == 1) ++count;
            output[i * N + j] = count == 1 ? 1 : 0;
        }
    }
}
