__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    if (threadIdx.x == 0) sums[blockIdx.x] = 0.0f * values[0];
}
