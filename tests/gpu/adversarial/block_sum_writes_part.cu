__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    if (blockIdx.x >= blocks / 2 || threadIdx.x != 0) return;
    float s = 0.0f;
    for (int i = 0; i < 256; ++i) s += values[blockIdx.x * 256 + i];
    sums[blockIdx.x] = s;
}
