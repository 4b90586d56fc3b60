// expect: wrong_output|unwritten_output
// task: big_saxpy
// category: NaN/Inf
// source: team (issue 33's category list: a NaN that a loose comparison lets through)
// label note: NaN outputs read as the unwritten-output sentinel: both refuse it; H200 run of session 15: unwritten_output
// Writes NaN where the answer is hard (negative x): NaN never passes.
#include <cuda_runtime.h>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] < 0.0f ? __int_as_float(0x7fc00000) : a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float)); cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx); cudaFree(dy);
}
