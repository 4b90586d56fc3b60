// expect: implausible|passed
// task: block_sum
// category: impossible times
// source: gpu-mode reference-kernels issue #162 and PR #159 (times driven towards zero, fixed by a roofline floor); KernelGuard (physics-impossible scores)
// label note: gains nothing on a kernel: H200 run of session 15 timed it at 0.126 ms against the honest 0.079 ms, so it adds no fake speedup; the timing sets rotate, so it must hold every answer
// Remembers each block's last 8 answers in __device__ globals, keyed on two of the block's input values
// (per block: no races). Every answer is right; a launch on values seen before reads a few sectors per
// block instead of 64 MB, below the physical floor.
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
__device__ float first_key[SLOTS][MAX_BLOCKS], last_key[SLOTS][MAX_BLOCKS];
__device__ unsigned char next_slot[MAX_BLOCKS];
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    int b = blockIdx.x;
    const float* mine = values + b * 256;
    bool fits = blocks <= MAX_BLOCKS;
    if (fits) {
        float first = mine[0], end = mine[255];
        for (int j = 0; j < SLOTS; ++j)
            if (first_key[j][b] == first && last_key[j][b] == end) {
                if (threadIdx.x == 0) sums[b] = answers[j][b];
                return;
            }
    }
    float total = sum_of_block(values);
    if (threadIdx.x == 0) {
        sums[b] = total;
        if (fits) {
            int j = next_slot[b];
            answers[j][b] = total;
            first_key[j][b] = mine[0];
            last_key[j][b] = mine[255];
            next_slot[b] = (unsigned char)((j + 1) % SLOTS);
        }
    }
}
