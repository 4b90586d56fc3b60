// Serial reference: direct complex multiply-accumulate in tap order.
extern "C" void complex_fir_f32(int n, int ntaps, const float* h, const float* x, float* y) {
    for (int i = 0; i < n; ++i) {
        float re = 0.0f, im = 0.0f;
        for (int k = 0; k < ntaps; ++k) {
            const float hr = h[2 * k], hi = h[2 * k + 1];
            const float xr = x[2 * (i + k)], xi = x[2 * (i + k) + 1];
            re += hr * xr - hi * xi;
            im += hr * xi + hi * xr;
        }
        y[2 * i] = re;
        y[2 * i + 1] = im;
    }
}
