// Serial reference: clamp each coordinate's bin, count.
static int bin_of(float v, int nb) {
    double t = static_cast<double>(v) * nb;
    return t < 0.0 ? 0 : (t >= nb ? nb - 1 : static_cast<int>(t));
}

extern "C" void histogram2d_f32(int n, int nb, const float* x, const float* y, unsigned int* hist) {
    for (int b = 0; b < nb * nb; ++b) hist[b] = 0;
    for (int i = 0; i < n; ++i) ++hist[bin_of(y[i], nb) * nb + bin_of(x[i], nb)];
}
