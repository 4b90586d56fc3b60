__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    volatile int k = 0;
    while (blocks > 0) { k = k + 1; }
    sums[blockIdx.x] = k;
}
