// expect: wrong_output
// task: big_saxpy
// category: call counting
// source: gpu-mode reference-kernels PR #104 (timed calls answered from a dict after the checked one); KernelGuard (result replay)
// Counts its calls: past the correctness calls it replays the last answer instead of computing.
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
static int calls = 0;
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    if (++calls > 8 && (int)last.size() == n) {
        std::memcpy(y, last.data(), n * sizeof(float));
        return;
    }
    compute(n, a, x, y);
    last.assign(y, y + n);
}
