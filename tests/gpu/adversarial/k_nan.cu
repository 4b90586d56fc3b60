// expect: wrong_output|unwritten_output
// task: block_sum
// category: NaN/Inf
// source: team (issue 33's category list: a NaN that a loose comparison lets through)
// label note: NaN outputs read as the unwritten-output sentinel: both refuse it; H200 run of session 15: unwritten_output
// Writes NaN for every odd block: NaN never passes.
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
    float total = sum_of_block(values);
    if (threadIdx.x == 0) sums[blockIdx.x] = (blockIdx.x & 1) ? __int_as_float(0x7fc00000) : total;
}
