// Serial reference: row-oriented forward substitution per system, double precision.
#include <cstddef>

extern "C" void trsv_lower_batched_f64(int batch, const double* L, const double* rhs, double* x) {
    for (int b = 0; b < batch; ++b) {
        const double* m = L + static_cast<std::size_t>(b) * 1024;
        const double* r = rhs + static_cast<std::size_t>(b) * 32;
        double* xs = x + static_cast<std::size_t>(b) * 32;
        for (int i = 0; i < 32; ++i) {
            double s = r[i];
            for (int j = 0; j < i; ++j) s -= m[i * 32 + j] * xs[j];
            xs[i] = s / m[i * 32 + i];
        }
    }
}
