// The coefficients are staged once per block in dynamic shared memory (broadcast reads afterwards).
// A grid-stride loop over float4 groups runs Horner's rule on the four values together (four
// independent fused multiply-add chains hide each other's latency), then a scalar loop covers the
// n % 4 tail.

extern "C" __global__ void poly_horner_kernel(int n, int degree, const float* __restrict__ coeffs,
                                              const float* __restrict__ x, float* __restrict__ y) {
    extern __shared__ float c[];
    for (int k = threadIdx.x; k <= degree; k += blockDim.x) c[k] = coeffs[k];
    __syncthreads();
    const int stride = gridDim.x * blockDim.x;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int groups = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int g = tid; g < groups; g += stride) {
        const float4 v = x4[g];
        const float top = c[degree];
        float4 r = make_float4(top, top, top, top);
        for (int k = degree - 1; k >= 0; --k) {
            const float ck = c[k];
            r.x = fmaf(r.x, v.x, ck);
            r.y = fmaf(r.y, v.y, ck);
            r.z = fmaf(r.z, v.z, ck);
            r.w = fmaf(r.w, v.w, ck);
        }
        y4[g] = r;
    }
    for (int i = groups * 4 + tid; i < n; i += stride) {
        const float v = x[i];
        float r = c[degree];
        for (int k = degree - 1; k >= 0; --k) r = fmaf(r, v, c[k]);
        y[i] = r;
    }
}
