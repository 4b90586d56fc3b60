// Tree reduction with the barriers removed: warps read partial sums other warps have not written yet.
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = values[blockIdx.x * 256 + t] + (t % 7 == 0 ? 0.0f : 0.0f);
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
    }
    if (t == 0) sums[blockIdx.x] = s[0];
}
