// Not a labelled case: run by test_adversarial_corpus.py's kernel spot-check test, with a trial count
// the candidate can count on (150 trials, no stop rule), which the labelled corpus's options do not give.
// source: session 21's review of issue 33 (only the last timed launch on each rotated copy was checked)
// It knows which timed launches are checked whole: the last on each rotated copy, whose output
// addresses do not change. Each block counts its own visits to each copy and, at the timing size,
// skips the work on visits 2 to 29: its sums are then what the outputs were restored to (poison:
// wrong). The test's options make four slots (rotate_buffers 3 over timing_sets 2, in whole rounds),
// so 150 trials or more give each copy at least 37 visits and its last one computes. (Until session
// 27 it skipped visits 2 to 49, right for three slots of 50 visits: with two timing sets, session 25,
// its last visits were skipped and the last-launch check caught it, so the test's first assertion
// failed on the H200 in sessions 25-27.) Only a spot check of the launches between sees it.
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
#define COPIES 16
__device__ unsigned long long owners[COPIES];
__device__ int visits[COPIES][MAX_BLOCKS];

__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    __shared__ int skim;
    if (threadIdx.x == 0) {
        skim = 0;
        if (blocks > 1000 && blocks <= MAX_BLOCKS) {
            unsigned long long me = (unsigned long long)sums;
            int k = 0;
            for (; k < COPIES; ++k) {
                unsigned long long old = atomicCAS(&owners[k], 0ULL, me);
                if (old == 0ULL || old == me) break;
            }
            if (k < COPIES) {
                int c = ++visits[k][blockIdx.x];
                skim = c > 1 && c < 30;
            }
        }
    }
    __syncthreads();
    if (skim) return;
    float total = sum_of_block(values);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}
