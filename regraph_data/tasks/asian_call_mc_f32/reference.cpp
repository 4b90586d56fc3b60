#include <cmath>

static inline unsigned long long splitmix64(unsigned long long z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Serial reference: every option simulates every path in float; payoffs summed in double.
extern "C" void asian_call_mc_f32(int nopt, int npaths, int nsteps, unsigned long long seed, const float* S0, const float* K,
                                  float* price) {
    const float r = 0.05f, sigma = 0.2f, T = 1.0f;
    const float dt = T / nsteps;
    const float drift = (r - 0.5f * sigma * sigma) * dt, vol = sigma * std::sqrt(dt);
    const float two_pi = 6.28318530717958647692f;
    for (int o = 0; o < nopt; ++o) {
        double sum = 0.0;
        for (int p = 0; p < npaths; ++p) {
            float s = S0[o], acc = 0.0f;
            for (int t = 0; t < nsteps; ++t) {
                const unsigned long long c = (unsigned long long)p * nsteps + t;
                const unsigned long long h = splitmix64(seed + (c + 1) * 0x9E3779B97F4A7C15ULL);
                const float u1 = ((float)(h >> 40) + 0.5f) * 0x1.0p-24f, u2 = (float)((h >> 16) & 0xFFFFFFULL) * 0x1.0p-24f;
                const float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(two_pi * u2);
                s *= std::exp(drift + vol * z);
                acc += s;
            }
            const float pay = acc / nsteps - K[o];
            sum += pay > 0.0f ? pay : 0.0f;
        }
        price[o] = (float)(std::exp(-(double)r * T) * sum / npaths);
    }
}
