// Serial reference: plain left-to-right double summation.
extern "C" void reduce_sum_f64(int n, const double* x, double* out) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) acc += x[i];
    out[0] = acc;
}
