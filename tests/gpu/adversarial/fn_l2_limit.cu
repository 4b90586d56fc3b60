// expect: static_rejected
// task: big_saxpy
// category: L2 tricks
// source: team (issue 33 item 5: the CUDA persisting-L2 set-aside)
// Correct, but sets a persisting-L2 set-aside: the static rules refuse cudaDeviceSetLimit (and the
// trials reset the set-aside anyway: tests/gpu/test_adversarial_corpus.py).
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
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 32 << 20);
    float *dx, *dy;
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = dy;
    attr.accessPolicyWindow.num_bytes = 32 << 20;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);
    cudaMemcpyAsync(dx, x, n * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(dy, y, n * sizeof(float), cudaMemcpyHostToDevice, s);
    saxpy_kernel<<<(n + 255) / 256, 256, 0, s>>>(n, a, dx, dy);
    cudaMemcpyAsync(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    cudaFree(dx);
    cudaFree(dy);
}
