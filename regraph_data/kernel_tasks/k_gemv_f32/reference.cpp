// Serial matrix-vector product, accumulated in double.
extern "C" void gemv(int m, int n, const float* a, const float* x, float* y) {
    for (int i = 0; i < m; ++i) {
        const float* row = a + static_cast<long long>(i) * n;
        double s = 0.0;
        for (int j = 0; j < n; ++j) s += static_cast<double>(row[j]) * x[j];
        y[i] = static_cast<float>(s);
    }
}
