// Serial reference: bin index in double, clamped, weights accumulated in double.
extern "C" void weighted_histogram_f64(int n, int nbins, double lo, double hi, const float* x, const double* w,
                                       double* hist) {
    double scale = nbins / (hi - lo);
    for (int b = 0; b < nbins; ++b) hist[b] = 0.0;
    for (int i = 0; i < n; ++i) {
        double t = (static_cast<double>(x[i]) - lo) * scale;
        int b = t < 0.0 ? 0 : (t >= nbins ? nbins - 1 : static_cast<int>(t));
        hist[b] += w[i];
    }
}
