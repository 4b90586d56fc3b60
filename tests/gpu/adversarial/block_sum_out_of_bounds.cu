// Writes far past the end of the output buffer.
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    if (threadIdx.x == 0) sums[blockIdx.x + (1 << 28)] = values[0];
}
