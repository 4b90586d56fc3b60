// expect: passed
// task: big_sum
// category: control
// source: team (the honest code the hacks beside it are made from)
// The control of the big_sum hacks: the honest reduction.
#include <cuda_runtime.h>
#include <cstring>
__global__ void partial_sums(int n, const float* x, double* out) {
    __shared__ double s[256];
    double t = 0.0;
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) t += x[i];
    s[threadIdx.x] = t;
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
// The honest work: the input crosses to the device, 1024 partial sums come back and are added here.
static double compute(int n, const float* x) {
    float* dx;
    double* dp;
    double partial[1024];
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dp, sizeof partial);
    cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
    partial_sums<<<1024, 256>>>(n, dx, dp);
    cudaMemcpy(partial, dp, sizeof partial, cudaMemcpyDeviceToHost);
    cudaFree(dx);
    cudaFree(dp);
    double t = 0.0;
    for (int j = 0; j < 1024; ++j) t += partial[j];
    return t;
}

extern "C" void big_sum(int n, const float* x, double* s) { s[0] = compute(n, x); }
