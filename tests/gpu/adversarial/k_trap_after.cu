// expect: cuda_error
// task: block_sum
// category: stale outputs after a failed launch
// source: Sakana AI CUDA Engineer retraction (outputs left in reused memory passed the check); KernelBench src/unit_tests/test_eval_adversarial.py (kernels that write nothing)
// Traps after its checked launches: a failed launch must not leave earlier outputs standing as the
// answer.
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
    if (launches > 6) __trap();
    float total = sum_of_block(values);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1);
}
