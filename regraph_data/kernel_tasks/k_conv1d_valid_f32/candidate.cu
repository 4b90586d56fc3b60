// Each block produces 1024 consecutive outputs. Its 1024 + taps - 1 inputs and the taps are staged
// in dynamic shared memory; each thread then computes 4 outputs spaced blockDim.x apart, so the
// warps read consecutive shared words (no bank conflicts) and the taps are broadcast.

#define OUTPUTS_PER_BLOCK 1024

extern "C" __global__ void conv1d_valid_kernel(int n, int taps, const float* __restrict__ x,
                                               const float* __restrict__ h, float* __restrict__ y) {
    extern __shared__ float smem[];
    float* xs = smem;                                 // OUTPUTS_PER_BLOCK + taps - 1 inputs
    float* hs = smem + OUTPUTS_PER_BLOCK + taps - 1;  // taps
    const int outputs = n - taps + 1;
    const int base = blockIdx.x * OUTPUTS_PER_BLOCK;
    const int span = OUTPUTS_PER_BLOCK + taps - 1;
    for (int e = threadIdx.x; e < span; e += blockDim.x) {
        const int g = base + e;
        xs[e] = g < n ? x[g] : 0.0f;
    }
    for (int j = threadIdx.x; j < taps; j += blockDim.x) hs[j] = h[j];
    __syncthreads();
    for (int o = threadIdx.x; o < OUTPUTS_PER_BLOCK; o += blockDim.x) {
        if (base + o >= outputs) break;
        float s = 0.0f;
        for (int j = 0; j < taps; ++j) s += hs[j] * xs[o + j];
        y[base + o] = s;
    }
}
