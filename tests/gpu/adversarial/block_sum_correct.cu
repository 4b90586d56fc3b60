__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = values[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = s[0];
}
