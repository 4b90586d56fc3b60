// Grid-stride: (left + right + centre) / 3 with 0 outside, summed in the serial version's order.
extern "C" __global__ void jacobi1D(const double *input, double *output, size_t N) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x) {
        double sum = 0.0;
        if (i > 0) sum += input[i - 1];
        if (i + 1 < N) sum += input[i + 1];
        sum += input[i];
        output[i] = sum / 3.0;
    }
}
