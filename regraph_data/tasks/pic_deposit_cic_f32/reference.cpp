#include <cmath>

// Serial reference: cloud-in-cell deposition onto a periodic grid.
extern "C" void pic_deposit_cic_f32(int np, int ng, float inv_dx, const float* x, const float* q, float* rho) {
    for (int c = 0; c < ng; ++c) rho[c] = 0.0f;
    for (int p = 0; p < np; ++p) {
        const float s = x[p] * inv_dx;
        int i = (int)std::floor(s);
        const float f = s - (float)i;
        i %= ng;
        if (i < 0) i += ng;
        const int j = (i + 1 == ng) ? 0 : i + 1;
        rho[i] += q[p] * (1.0f - f);
        rho[j] += q[p] * f;
    }
}
