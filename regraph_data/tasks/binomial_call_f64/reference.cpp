#include <algorithm>
#include <cmath>
#include <vector>

// Serial reference: CRR tree, leaves then in-place backward induction, one option at a time.
extern "C" void binomial_call_f64(int nopt, int nsteps, const double* S, const double* K, const double* T, double* price) {
    const double r = 0.05, sigma = 0.3;
    std::vector<double> v(nsteps + 1);
    for (int o = 0; o < nopt; ++o) {
        const double dt = T[o] / nsteps, sd = sigma * std::sqrt(dt);
        const double u = std::exp(sd), d = 1.0 / u;
        const double p = (std::exp(r * dt) - d) / (u - d), disc = std::exp(-r * dt);
        for (int j = 0; j <= nsteps; ++j) v[j] = std::max(S[o] * std::exp(sd * (2 * j - nsteps)) - K[o], 0.0);
        for (int i = nsteps - 1; i >= 0; --i)
            for (int j = 0; j <= i; ++j) v[j] = disc * (p * v[j + 1] + (1.0 - p) * v[j]);
        price[o] = v[0];
    }
}
