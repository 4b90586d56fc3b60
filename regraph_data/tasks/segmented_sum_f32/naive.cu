#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return e_; } while (0)

// One thread per segment, summing its values sequentially.
__global__ void segsum_thread(int nseg, const int* seg_ptr, const float* values, float* out) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nseg) return;
    float acc = 0.0f;
    for (int j = seg_ptr[s]; j < seg_ptr[s + 1]; ++j) acc += values[j];
    out[s] = acc;
}

static cudaError_t run_segsum(int nseg, const int* seg_ptr, const float* values, float* out) {
    segsum_thread<<<(nseg + 255) / 256, 256>>>(nseg, seg_ptr, values, out);
    return cudaGetLastError();
}

extern "C" void segmented_sum_f32(int nseg, int n, const int* seg_ptr, const float* values, float* out) {
    int* dp = nullptr;
    float *dv = nullptr, *dout = nullptr;
    do {
        CUDA_TRY(cudaMalloc(&dp, (static_cast<size_t>(nseg) + 1) * sizeof(int)));
        CUDA_TRY(cudaMalloc(&dv, static_cast<size_t>(n) * sizeof(float)));
        CUDA_TRY(cudaMalloc(&dout, static_cast<size_t>(nseg) * sizeof(float)));
        CUDA_TRY(cudaMemcpy(dp, seg_ptr, (static_cast<size_t>(nseg) + 1) * sizeof(int), cudaMemcpyHostToDevice));
        CUDA_TRY(cudaMemcpy(dv, values, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_TRY(run_segsum(nseg, dp, dv, dout));
        CUDA_TRY(cudaMemcpy(out, dout, static_cast<size_t>(nseg) * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(dp);
    cudaFree(dv);
    cudaFree(dout);
}
