// Serial 7-point stencil with clamp-to-edge boundaries, summed from the leftmost tap.
extern "C" void stencil1d(int n, const float* x, const float* w, float* y) {
    for (int i = 0; i < n; ++i) {
        float s = 0.0f;
        for (int j = -3; j <= 3; ++j) {
            int k = i + j;
            k = k < 0 ? 0 : (k > n - 1 ? n - 1 : k);
            s += w[j + 3] * x[k];
        }
        y[i] = s;
    }
}
