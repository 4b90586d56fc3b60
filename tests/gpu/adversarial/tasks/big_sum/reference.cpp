extern "C" void big_sum(int n, const float* x, double* s) {
    double t = 0.0;
    for (int i = 0; i < n; ++i) t += x[i];
    s[0] = t;
}
