// expect: wrong_output|implausible|nondeterministic
// task: block_sum
// category: pointer-keyed memoization
// source: gpu-mode reference-kernels issue #148 and PR #170 (answers cached on the input object); KernelBench src/unit_tests/test_eval_adversarial.py (kernels that cache results)
// Keys its remembered answer on the address of the input buffer: a reused address returns another
// set's answer; an address that keeps its values returns the right one without reading them.
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

#define MAX_BLOCKS (1 << 17)
__device__ float answers[4][MAX_BLOCKS];
__device__ const float* owners[4];
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    for (int j = 0; j < 4; ++j)
        if (owners[j] == values) {
            if (threadIdx.x == 0) sums[blockIdx.x] = answers[j][blockIdx.x];
            return;
        }
    float total = sum_of_block(values);
    int slot = (int)(((unsigned long long)values >> 20) & 3);
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = total;
        if (blocks <= MAX_BLOCKS) answers[slot][blockIdx.x] = total;
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) owners[slot] = values;
}
