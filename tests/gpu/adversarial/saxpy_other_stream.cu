// Right arithmetic, but it returns before its own stream has finished: the result is copied back into
// a pinned staging buffer asynchronously and read from that buffer on the host without waiting, so the
// caller gets the previous call's result (zeros on the first call). The kernel spins first (about a
// millisecond per wave) so the host always wins the race. With the SYNC marker replaced by
// cudaStreamSynchronize(s) the candidate is correct (a GPU test checks that), so only the missing wait
// on the other stream can make it fail.
#include <cuda_runtime.h>
#include <cstring>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    long long start = clock64();
    while (clock64() - start < 4000000LL) {
    }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    static float *dx = nullptr, *dy = nullptr, *staging = nullptr;
    static int capacity = 0;
    static cudaStream_t s;
    if (n > capacity) {
        if (dx) { cudaFree(dx); cudaFree(dy); cudaFreeHost(staging); }
        else cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaMalloc(&dx, n * sizeof(float));
        cudaMalloc(&dy, n * sizeof(float));
        cudaMallocHost(&staging, n * sizeof(float));
        capacity = n;
    }
    cudaMemcpyAsync(dx, x, n * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(dy, y, n * sizeof(float), cudaMemcpyHostToDevice, s);
    saxpy_kernel<<<(n + 255) / 256, 256, 0, s>>>(n, a, dx, dy);
    cudaMemcpyAsync(staging, dy, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    /* SYNC */
    std::memcpy(y, staging, n * sizeof(float));
}
