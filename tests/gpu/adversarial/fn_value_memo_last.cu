// expect: passed
// task: big_saxpy
// category: value-keyed memoization
// source: gpu-mode reference-kernels issue #148 and PR #170 (cache keyed on the inputs' content; the timed loop reused them); issue 33's own run on 57d0025 (755x and 1,684x)
// Remembers its last answer, keyed on a sample of the input values (not their address).
// Before issue 33 every timed call saw the values of the call before it, so it answered every timed
// call from memory (on a compute-heavy task, at hundreds of times the honest speed); with the timed
// calls rotating through timing sets it recomputes every time and passes timed like the honest code
// (tests/gpu/test_adversarial_corpus.py compares its median with fn_honest.cu's).
#include <vector>
#include <cuda_runtime.h>
#include <cstring>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
// The honest work: copies in, one launch, the copy back.
static void compute(int n, float a, const float* x, float* y) {
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}

static std::vector<float> last;
static float key[4];
static int key_n = -1;
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    float k[4] = {x[0], x[n / 2], y[n / 3], y[n - 1]};
    if (n == key_n && std::memcmp(k, key, sizeof k) == 0) {
        std::memcpy(y, last.data(), n * sizeof(float));
        return;
    }
    compute(n, a, x, y);
    last.assign(y, y + n);
    key_n = n;
    std::memcpy(key, k, sizeof k);
}
