#include <cstddef>

// Serial reference: direct-form FIR evaluated only at every decim-th input position.
extern "C" void fir_decimate_f32(int m, int ntaps, int decim, const float* h, const float* x, float* y) {
    for (int j = 0; j < m; ++j) {
        const float* xj = x + (std::size_t)j * decim;
        float acc = 0.0f;
        for (int k = 0; k < ntaps; ++k) acc += h[k] * xj[k];
        y[j] = acc;
    }
}
