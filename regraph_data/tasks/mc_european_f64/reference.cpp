#include <algorithm>
#include <cmath>

static inline unsigned long long splitmix64(unsigned long long z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Serial reference: one Box-Muller pair per two consecutive paths, straightforward averaging.
extern "C" void mc_european_f64(int nopt, int npaths, unsigned long long seed, const double* S0, const double* K,
                                double* price) {
    const double r = 0.05, sigma = 0.2, T = 1.0;
    const double drift = (r - 0.5 * sigma * sigma) * T, vol = sigma * std::sqrt(T), disc = std::exp(-r * T);
    const double two_pi = 6.283185307179586476925286766559;
    for (int o = 0; o < nopt; ++o) {
        double sum = 0.0;
        for (int p = 0; p < npaths; ++p) {
            const unsigned long long g = ((unsigned long long)o * npaths + p) >> 1;
            const unsigned long long h1 = splitmix64(seed + (2 * g + 1) * 0x9E3779B97F4A7C15ULL);
            const unsigned long long h2 = splitmix64(seed + (2 * g + 2) * 0x9E3779B97F4A7C15ULL);
            const double u1 = ((double)(h1 >> 11) + 0.5) * 0x1.0p-53, u2 = (double)(h2 >> 11) * 0x1.0p-53;
            const double rad = std::sqrt(-2.0 * std::log(u1));
            const double z = (p & 1) ? rad * std::sin(two_pi * u2) : rad * std::cos(two_pi * u2);
            const double st = S0[o] * std::exp(drift + vol * z);
            sum += std::max(st - K[o], 0.0);
        }
        price[o] = disc * sum / npaths;
    }
}
