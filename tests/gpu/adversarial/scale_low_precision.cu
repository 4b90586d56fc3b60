// Computes in float instead of double: correct-looking but outside the task's 1e-12 tolerance.
__global__ void scale_kernel(long long count, double s, const double* in, double* out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < count) out[i] = (double)((float)s * (float)in[i]);
}
