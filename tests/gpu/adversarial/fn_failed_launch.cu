// expect: wrong_output|unwritten_output|cuda_error
// task: big_saxpy
// category: stale outputs after a failed launch
// source: Sakana AI CUDA Engineer retraction (outputs left in reused memory passed the check); KernelBench src/unit_tests/test_eval_adversarial.py (kernels that write nothing)
// A launch that fails (2048 threads per block) and an unchecked copy back: y keeps what the
// device buffer held, which is the input, not the answer.
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
    saxpy_kernel<<<(n + 2047) / 2048, 2048>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
}

extern "C" void saxpy(int n, float a, const float* x, float* y) { compute(n, a, x, y); }
