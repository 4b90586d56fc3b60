// expect: implausible
// task: big_sum
// category: impossible times
// source: gpu-mode reference-kernels issue #162 and PR #159 (times driven towards zero, fixed by a roofline floor); KernelGuard (physics-impossible scores)
// Remembers every answer (up to 8), keyed on a sample of the input values: rotating the timing sets
// does not beat it (its answers are right); the physical floor does (256 MB must cross to the device or
// be read from host memory; this reads four floats).
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
static float keys[8][4];
static int key_n[8];
static int kept = 0;
extern "C" void big_sum(int n, const float* x, double* s) {
    float k[4] = {x[0], x[n / 3], x[n / 2], x[n - 1]};
    for (int j = 0; j < kept; ++j)
        if (key_n[j] == n && std::memcmp(k, keys[j], sizeof k) == 0) {
            s[0] = answers[j];
            return;
        }
    s[0] = compute(n, x);
    int slot = kept < 8 ? kept++ : 7;
    answers[slot] = s[0];
    key_n[slot] = n;
    std::memcpy(keys[slot], k, sizeof k);
}
