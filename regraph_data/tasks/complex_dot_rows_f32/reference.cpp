// Serial reference: one complex dot product with conjugation per row, accumulated in float.
extern "C" void complex_dot_rows_f32(int rows, int len, const float* a, const float* b, float* out) {
    for (int r = 0; r < rows; ++r) {
        const float* x = a + 2LL * r * len;
        const float* y = b + 2LL * r * len;
        float re = 0.0f, im = 0.0f;
        for (int k = 0; k < len; ++k) {
            re += x[2 * k] * y[2 * k] + x[2 * k + 1] * y[2 * k + 1];
            im += x[2 * k + 1] * y[2 * k] - x[2 * k] * y[2 * k + 1];
        }
        out[2 * r] = re;
        out[2 * r + 1] = im;
    }
}
