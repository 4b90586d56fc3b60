// Returns without writing: the output keeps whatever the buffer held (the executor's poison).
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    if (blocks < 0) sums[0] = values[0];
}
