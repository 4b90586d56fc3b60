// Two-level binary search. Every block first copies a sample of the sorted array (every step-th
// element, at most 1024 of them) into shared memory; a search over the sample narrows each query to
// a window of fewer than step elements, which is then searched in global memory. This replaces the
// top ~10 levels of dependent global loads with shared-memory loads.
//
// With step = ceil(n/1024) and K = ceil(n/step) <= 1024 samples sample[k] = sorted[k*step]: if k* is
// the first sample >= v, the answer lies in ((k*-1)*step, k*step] (or ((K-1)*step, n] when k* = K).

#define MAX_SAMPLES 1024

extern "C" __global__ void lower_bound_kernel(int n, int q, const float* __restrict__ sorted,
                                              const float* __restrict__ queries, int* __restrict__ pos) {
    __shared__ float sample[MAX_SAMPLES];
    const int step = (n + MAX_SAMPLES - 1) / MAX_SAMPLES;
    const int samples = (n + step - 1) / step;
    for (int k = threadIdx.x; k < samples; k += blockDim.x) sample[k] = sorted[static_cast<long long>(k) * step];
    __syncthreads();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= q) return;
    const float v = queries[i];
    int lo = 0;
    int hi = samples;
    while (lo < hi) {  // first sample >= v
        const int mid = (lo + hi) >> 1;
        if (sample[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    const int k = lo;
    lo = k > 0 ? (k - 1) * step + 1 : 0;
    hi = k < samples ? k * step : n;
    while (lo < hi) {  // first element >= v in [lo, hi), hi if none
        const int mid = (lo + hi) >> 1;
        if (__ldg(sorted + mid) < v) lo = mid + 1;
        else hi = mid;
    }
    pos[i] = lo;
}
