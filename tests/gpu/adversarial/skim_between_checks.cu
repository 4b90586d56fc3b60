// Not a labelled case: run by test_adversarial_corpus.py's spot-check test, with a trial count the
// candidate can count on (150 trials, no stop rule), which the labelled corpus's options do not give.
// source: session 21's review of issue 33 (only the last timed call on each rotated copy was checked)
// It knows which timed calls are checked whole: the last on each rotated copy, whose addresses do not
// change. On the timing-size inputs it skips the kernel on every call of a copy but its first and its
// 50th (the copies still move, so its outputs are its inputs: wrong). Only a spot check sees it.
#include <cuda_runtime.h>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

static const float* seen[64];
static int visits[64];
static int nseen = 0;

extern "C" void saxpy(int n, float a, const float* x, float* y) {
    bool skim = false;
    if (n > 1000) {
        int k = 0;
        while (k < nseen && seen[k] != x) ++k;
        if (k == nseen && nseen < 64) {
            seen[nseen] = x;
            visits[nseen++] = 0;
        }
        int c = k < 64 ? ++visits[k] : 1;
        skim = c > 1 && c < 50;
    }
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    if (!skim) saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}
