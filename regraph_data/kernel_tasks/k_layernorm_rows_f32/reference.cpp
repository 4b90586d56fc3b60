// Serial layer normalisation with a two-pass mean/variance in double.
#include <cmath>

extern "C" void layernorm_rows(int rows, int cols, float eps, const float* x, const float* gamma,
                               const float* beta, float* y) {
    for (int r = 0; r < rows; ++r) {
        const float* in = x + static_cast<long long>(r) * cols;
        float* out = y + static_cast<long long>(r) * cols;
        double mean = 0.0;
        for (int c = 0; c < cols; ++c) mean += in[c];
        mean /= cols;
        double var = 0.0;
        for (int c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
        var /= cols;
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int c = 0; c < cols; ++c)
            out[c] = static_cast<float>((in[c] - mean) * inv * gamma[c] + beta[c]);
    }
}
