// Serial reference: direct-form FIR, one dot product per output sample.
extern "C" void fir_filter_f32(int n, int taps, const float* x, const float* coef, float* y) {
    for (int i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int k = 0; k < taps; ++k) acc += coef[k] * x[i + k];
        y[i] = acc;
    }
}
