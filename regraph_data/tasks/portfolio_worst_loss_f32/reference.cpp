#include <cstddef>
#include <limits>

// Serial reference: every portfolio against every scenario, keeping the largest loss.
extern "C" void portfolio_worst_loss_f32(int nport, int nscen, int nasset, const float* w, const float* ret, float* worst) {
    for (int p = 0; p < nport; ++p) {
        float best = -std::numeric_limits<float>::infinity();
        for (int s = 0; s < nscen; ++s) {
            float dot = 0.0f;
            for (int a = 0; a < nasset; ++a) dot += w[(std::size_t)p * nasset + a] * ret[(std::size_t)s * nasset + a];
            const float loss = -dot;
            if (loss > best) best = loss;
        }
        worst[p] = best;
    }
}
