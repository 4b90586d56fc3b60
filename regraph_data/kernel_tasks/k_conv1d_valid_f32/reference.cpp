// Serial FIR filter in valid mode. Outputs are processed in cache-sized blocks with the tap loop
// outside the output loop, so that the compiler can vectorise across outputs while the block stays in
// cache; every output still accumulates h[0]*x[i] + h[1]*x[i+1] + ... in tap order, starting from 0.
extern "C" void conv1d_valid(int n, int taps, const float* x, const float* h, float* y) {
    const int outputs = n - taps + 1;
    const int block = 4096;
    for (int start = 0; start < outputs; start += block) {
        const int end = start + block < outputs ? start + block : outputs;
        for (int i = start; i < end; ++i) y[i] = 0.0f;
        for (int j = 0; j < taps; ++j) {
            const float hj = h[j];
            for (int i = start; i < end; ++i) y[i] += hj * x[i + j];
        }
    }
}
