// Serial reference: two passes (mean, then squared deviations), as a numerically safe baseline.
extern "C" void mean_var_f64(int n, const double* x, double* out) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += x[i];
    double mean = s / n;
    double m2 = 0.0;
    for (int i = 0; i < n; ++i) m2 += (x[i] - mean) * (x[i] - mean);
    out[0] = mean;
    out[1] = m2 / n;
}
