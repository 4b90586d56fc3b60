// Serial reference: for j <= i, dot product of rows i and j of A (both unit stride), double accumulator.
#include <cstddef>

extern "C" void syrk_lower_f32(int n, int k, float alpha, const float* A, float beta, float* C) {
    for (int i = 0; i < n; ++i) {
        const float* ai = A + static_cast<std::size_t>(i) * k;
        for (int j = 0; j <= i; ++j) {
            const float* aj = A + static_cast<std::size_t>(j) * k;
            double s = 0.0;
            for (int p = 0; p < k; ++p) s += static_cast<double>(ai[p]) * aj[p];
            float* c = C + static_cast<std::size_t>(i) * n + j;
            *c = static_cast<float>(alpha * s + static_cast<double>(beta) * *c);
        }
    }
}
