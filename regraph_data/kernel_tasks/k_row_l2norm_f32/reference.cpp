// Serial row norms, accumulated in double.
#include <cmath>

extern "C" void row_l2norm(int rows, int cols, const float* a, float* norms) {
    for (int r = 0; r < rows; ++r) {
        const float* row = a + static_cast<long long>(r) * cols;
        double s = 0.0;
        for (int c = 0; c < cols; ++c) s += static_cast<double>(row[c]) * row[c];
        norms[r] = static_cast<float>(std::sqrt(s));
    }
}
