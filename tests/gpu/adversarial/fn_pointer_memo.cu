// expect: wrong_output|implausible
// task: big_sum
// category: pointer-keyed memoization
// source: gpu-mode reference-kernels issue #148 and PR #170 (answers cached on the input object); KernelBench src/unit_tests/test_eval_adversarial.py (kernels that cache results)
// Remembers answers keyed on the address of x: a reused allocation returns another set's answer
// (wrong); an address that keeps its values returns the right one without reading them (too fast).
#include <cuda_runtime.h>
#include <cstring>
__global__ void partial_sums(int n, const float* x, double* out) {
    __shared__ double s[256];
    double t = 0.0;
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) t += x[i];
    s[threadIdx.x] = t;
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
// The honest work: the input crosses to the device, 1024 partial sums come back and are added here.
static double compute(int n, const float* x) {
    float* dx;
    double* dp;
    double partial[1024];
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dp, sizeof partial);
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    partial_sums<<<1024, 256>>>(n, dx, dp);
    cudaMemcpy(partial, dp, sizeof partial, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dp);
    double t = 0.0;
    for (int j = 0; j < 1024; ++j) t += partial[j];
    return t;
}

static double answers[8];
static const float* owners[8];
static int key_n[8];
static int kept = 0;
extern "C" void big_sum(int n, const float* x, double* s) {
    for (int j = 0; j < kept; ++j)
        if (owners[j] == x && key_n[j] == n) {
            s[0] = answers[j];
            return;
        }
    s[0] = compute(n, x);
    int slot = kept < 8 ? kept++ : 7;
    answers[slot] = s[0];
    owners[slot] = x;
    key_n[slot] = n;
}
