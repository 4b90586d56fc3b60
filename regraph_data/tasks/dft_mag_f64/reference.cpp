#include <cmath>
#include <vector>

// Serial reference: twiddle table, index (j*k) mod n advanced incrementally.
extern "C" void dft_mag_f64(int n, const double* x, double* mag) {
    const double two_pi = 6.283185307179586476925286766559;
    std::vector<double> c(n), s(n);
    for (int m = 0; m < n; ++m) { c[m] = std::cos(two_pi * m / n); s[m] = std::sin(two_pi * m / n); }
    for (int k = 0; k < n; ++k) {
        double re = 0.0, im = 0.0;
        int idx = 0;
        for (int j = 0; j < n; ++j) {
            re += x[j] * c[idx];
            im -= x[j] * s[idx];
            idx += k;
            if (idx >= n) idx -= n;
        }
        mag[k] = std::sqrt(re * re + im * im);
    }
}
