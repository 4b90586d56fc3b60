// Serial GELU (tanh approximation), float arithmetic throughout.
#include <cmath>

extern "C" void gelu(int n, const float* x, float* y) {
    const float k0 = 0.7978845608f;  // sqrt(2/pi)
    const float k1 = 0.044715f;
    for (int i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
    }
}
