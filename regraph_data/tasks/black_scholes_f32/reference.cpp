#include <cmath>

static inline float cnd(float d) { return 0.5f * std::erfc(-d * 0.70710678118654752f); }

// Serial reference: closed-form Black-Scholes in single precision.
extern "C" void black_scholes_f32(int n, float r, float v, const float* S, const float* K, const float* T, float* call, float* put) {
    for (int i = 0; i < n; ++i) {
        const float sqrtT = std::sqrt(T[i]);
        const float d1 = (std::log(S[i] / K[i]) + (r + 0.5f * v * v) * T[i]) / (v * sqrtT);
        const float d2 = d1 - v * sqrtT;
        const float disc = K[i] * std::exp(-r * T[i]);
        call[i] = S[i] * cnd(d1) - disc * cnd(d2);
        put[i] = disc * cnd(-d2) - S[i] * cnd(-d1);
    }
}
