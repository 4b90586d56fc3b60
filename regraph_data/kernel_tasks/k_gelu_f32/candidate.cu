// GELU, grid-stride over float4 groups (cudaMalloc'd buffers are 256-byte aligned), then a scalar tail.

__device__ __forceinline__ float gelu_one(float v) {
    const float k0 = 0.7978845608f;
    const float k1 = 0.044715f;
    return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

extern "C" __global__ void gelu_kernel(int n, const float* __restrict__ x, float* __restrict__ y) {
    const int stride = gridDim.x * blockDim.x;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int groups = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int g = tid; g < groups; g += stride) {
        float4 v = x4[g];
        v.x = gelu_one(v.x);
        v.y = gelu_one(v.y);
        v.z = gelu_one(v.z);
        v.w = gelu_one(v.w);
        y4[g] = v;
    }
    for (int i = groups * 4 + tid; i < n; i += stride) y[i] = gelu_one(x[i]);
}
