// Runs out of host memory: asks for 4 EiB of host scratch, more than any address space holds, so the
// allocation is refused at once whatever the kernel's overcommit policy (std::bad_alloc ends the
// worker) before the (right) work on the device. It must be reported as out_of_memory, never as a
// crash, a timeout or a wrong output. (A smaller request that the kernel overcommits would instead
// fault its pages in for seconds and meet the candidate's run limit before the memory limit.)
#include <cuda_runtime.h>
#include <cstddef>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    const size_t count = (1ull << 62) / sizeof(float);
    float* volatile scratch = new float[count];  // volatile: the compiler may not drop the allocation
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
