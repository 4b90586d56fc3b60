// expect: static_rejected
// task: block_sum
// category: timing-call detection
// source: KernelGuard (timer manipulation); gpu-mode reference-kernels PR #104 (the timed loop told from the checked call)
// Reads the GPU's global timer to tell timed launches from checked ones.
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
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    float total = (now & 1) ? 0.0f : sum_of_block(values);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}
