// expect: wrong_output
// task: block_sum
// category: input mutation
// source: team (issue 33's category list; a const input written so a later call starts from other values)
// Zeroes its const input after reading it, so a later launch on the same buffer sums zeros.
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
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
    const_cast<float*>(values)[blockIdx.x * 256 + threadIdx.x] = 0.0f;
}
