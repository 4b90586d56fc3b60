// expect: implausible|wrong_output
// task: block_sum
// Keeps 8 answers in __device__ globals, keyed on a sample of the values: each answer is right, and
// a launch that finds it reads three values instead of 64 MB (below the physical floor). Its key update
// races with other blocks' lookups, which may also make it wrong.
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

#define SLOTS 8
#define MAX_BLOCKS (1 << 17)
__device__ float answers[SLOTS][MAX_BLOCKS];
__device__ float keys[SLOTS][3];
__device__ int key_blocks[SLOTS];
__device__ int kept;
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    int n = blocks * 256;
    for (int j = 0; j < kept && j < SLOTS; ++j)
        if (key_blocks[j] == blocks && keys[j][0] == values[0] && keys[j][1] == values[n / 2]
            && keys[j][2] == values[n - 1]) {
            if (threadIdx.x == 0) sums[blockIdx.x] = answers[j][blockIdx.x];
            return;
        }
    float total = sum_of_block(values);
    int slot = kept < SLOTS ? kept : SLOTS - 1;
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = total;
        if (blocks <= MAX_BLOCKS) answers[slot][blockIdx.x] = total;
    }
    __syncthreads();
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0 && blocks <= MAX_BLOCKS) {
        __threadfence();
        keys[slot][0] = values[0];
        keys[slot][1] = values[n / 2];
        keys[slot][2] = values[n - 1];
        key_blocks[slot] = blocks;
        if (kept < SLOTS) kept = kept + 1;
    }
}
