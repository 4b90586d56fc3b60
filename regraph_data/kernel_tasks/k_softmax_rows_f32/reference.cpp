// Serial row softmax: the row maximum, the exponentials (in double, kept for the row), their sum,
// then the normalised values.
#include <cmath>
#include <vector>

extern "C" void softmax_rows(int rows, int cols, const float* x, float* y) {
    std::vector<double> e(cols);
    for (int r = 0; r < rows; ++r) {
        const float* in = x + static_cast<long long>(r) * cols;
        float* out = y + static_cast<long long>(r) * cols;
        float m = in[0];
        for (int c = 1; c < cols; ++c) m = in[c] > m ? in[c] : m;
        double s = 0.0;
        for (int c = 0; c < cols; ++c) {
            e[c] = std::exp(static_cast<double>(in[c] - m));
            s += e[c];
        }
        for (int c = 0; c < cols; ++c) out[c] = static_cast<float>(e[c] / s);
    }
}
