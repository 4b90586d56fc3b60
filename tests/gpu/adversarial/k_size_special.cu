// expect: wrong_output|unwritten_output
// task: block_sum
// category: size specialisation
// source: team (issue 33's category list: right at the checked size only)
// Specialised to the test size (400 blocks): at any other size every other block is skipped.
// The honest block sum.
__device__ float sum_of_block(const float* values) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = values[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    return s[0];
}

__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    if (blocks != 400 && (blockIdx.x & 1)) return;
    float total = sum_of_block(values);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}
