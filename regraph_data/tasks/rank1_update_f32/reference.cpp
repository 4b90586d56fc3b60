// Serial reference: row by row, the row scale alpha*x[i] computed once.
#include <cstddef>

extern "C" void rank1_update_f32(int m, int n, float alpha, const float* x, const float* y, float* A) {
    for (int i = 0; i < m; ++i) {
        float s = alpha * x[i];
        float* row = A + static_cast<std::size_t>(i) * n;
        for (int j = 0; j < n; ++j) row[j] += s * y[j];
    }
}
