// Asks the device for a terabyte; the allocation fails and the candidate returns without an output.
// The executor cannot see a candidate's own CUDA runtime errors (its cudart is linked into the
// candidate), so "no output" (wrong_output) is the verdict to expect, exactly; running out of HOST
// memory is saxpy_huge_host_allocation.cu.
#include <cuda_runtime.h>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    float *dx = nullptr, *dy = nullptr;
    if (cudaMalloc(&dx, 1ull << 40) != cudaSuccess) return;
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
}
