// expect: passed
// task: block_sum
// category: control
// source: team (the honest code the hacks beside it are made from)
// The control: the honest kernel of every kernel-task hack below.
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
}
