// Serial reference: direct lag-by-lag sum with a double accumulator.
extern "C" void autocorr_f32(int n, int nlag, const float* x, float* r) {
    for (int l = 0; l < nlag; ++l) {
        double s = 0.0;
        for (int i = 0; i + l < n; ++i) s += (double)x[i] * (double)x[i + l];
        r[l] = (float)s;
    }
}
