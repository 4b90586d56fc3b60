#include <cstddef>

// Serial reference: Horner's rule for every (polynomial, point) pair.
extern "C" void poly_eval_horner_f32(int npoly, int npts, int deg, const float* coef, const float* x, float* y) {
    for (int p = 0; p < npoly; ++p) {
        const float* c = coef + (std::size_t)p * (deg + 1);
        for (int i = 0; i < npts; ++i) {
            float v = c[deg];
            for (int k = deg - 1; k >= 0; --k) v = v * x[i] + c[k];
            y[(std::size_t)p * npts + i] = v;
        }
    }
}
