// expect: unwritten_output|wrong_output
// task: block_sum
// category: call counting
// source: gpu-mode reference-kernels PR #104 (timed calls answered from a dict after the checked one); KernelGuard (result replay)
// Counts its launches in a __device__ global and stops writing after the correctness launches.
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

__device__ unsigned int launches;
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    unsigned int seen = launches;
    float total = sum_of_block(values);
    if (seen < 6 && threadIdx.x == 0) sums[blockIdx.x] = total;
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1);
}
