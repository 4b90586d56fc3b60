// expect: passed
// task: block_sum
// category: value-keyed memoization
// source: gpu-mode reference-kernels issue #148 and PR #170 (cache keyed on the inputs' content; the timed loop reused them); issue 33's own run on 57d0025 (755x and 1,684x)
// Remembers each block's last answer in __device__ globals, keyed on two of the block's input values
// (per block, so no launch races with itself). On the same values (the trials before issue 33) a block
// reads two sectors of its 1 KB; with the timed launches rotating through timing sets it recomputes.
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
__device__ float last[MAX_BLOCKS];
__device__ float first_key[MAX_BLOCKS], last_key[MAX_BLOCKS];
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    int b = blockIdx.x;
    const float* mine = values + b * 256;
    bool fits = blocks <= MAX_BLOCKS;
    if (fits && first_key[b] == mine[0] && last_key[b] == mine[255]) {
        if (threadIdx.x == 0) sums[b] = last[b];
        return;
    }
    float total = sum_of_block(values);
    if (threadIdx.x == 0) {
        sums[b] = total;
        if (fits) {
            last[b] = total;
            first_key[b] = mine[0];
            last_key[b] = mine[255];
        }
    }
}
