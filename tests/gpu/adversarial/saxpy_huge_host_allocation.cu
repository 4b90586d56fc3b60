// Runs out of host memory: asks for 4 TiB of host scratch and writes to it before doing the (right)
// work on the device. Either the allocation is refused (std::bad_alloc ends the worker) or, where the
// kernel overcommits, the touched pages grow the worker's resident memory until the executor's memory
// limit kills it. Both must be reported as out_of_memory, never as a crash, a timeout or a wrong output.
#include <cuda_runtime.h>
#include <cstddef>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    const size_t count = (1ull << 42) / sizeof(float);
    float* scratch = new float[count];
    for (size_t i = 0; i < count; i += 1024) scratch[i] = x[i % n];
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dy);
    delete[] scratch;
}
