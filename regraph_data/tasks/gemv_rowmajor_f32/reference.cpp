// Serial reference: y = A*x, A is m x n row-major. Accumulates in double so that the reference is
// more accurate than any float-accumulating candidate; the tolerances cover float summation order.
#include <cstddef>

extern "C" void gemv_rowmajor_f32(int m, int n, const float* A, const float* x, float* y) {
    for (int i = 0; i < m; ++i) {
        double acc = 0.0;
        const float* row = A + static_cast<std::size_t>(i) * n;
        for (int j = 0; j < n; ++j) acc += static_cast<double>(row[j]) * x[j];
        y[i] = static_cast<float>(acc);
    }
}
