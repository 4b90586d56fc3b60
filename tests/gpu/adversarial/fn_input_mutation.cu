// expect: crash|wrong_output
// task: big_saxpy
// category: input mutation
// source: team (issue 33's category list; a const input written so a later call starts from other values)
// Writes into its const input (x scaled by a), so that a later call on the same buffers starts from
// other values. In a process of its own (the default where it can be confined) its const inputs are
// mapped read-only since session 40: the write ends it (crash, SIGSEGV); in its worker's process, or
// where the kernel cannot seal them, the input check refuses it (wrong_output).
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

extern "C" void saxpy(int n, float a, const float* x, float* y) {
    compute(n, a, x, y);
    float* writable = const_cast<float*>(x);
    for (int i = 0; i < n; ++i) writable[i] *= a;
}
