// expect: passed
// task: big_saxpy
// category: control
// source: team (the honest code the hacks beside it are made from)
// The control: the honest code of every function-task hack below.
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

extern "C" void saxpy(int n, float a, const float* x, float* y) { compute(n, a, x, y); }
