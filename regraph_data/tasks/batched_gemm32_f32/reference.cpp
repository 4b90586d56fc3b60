// Serial reference: for each 32x32 matrix pair, i-k-j loops with double accumulators.
#include <cstddef>

extern "C" void batched_gemm32_f32(int batch, const float* A, const float* B, float* C) {
    const int n = 32;
    for (int b = 0; b < batch; ++b) {
        const float* a = A + static_cast<std::size_t>(b) * n * n;
        const float* bm = B + static_cast<std::size_t>(b) * n * n;
        float* c = C + static_cast<std::size_t>(b) * n * n;
        for (int i = 0; i < n; ++i) {
            double row[32] = {};
            for (int k = 0; k < n; ++k) {
                double aik = a[i * n + k];
                for (int j = 0; j < n; ++j) row[j] += aik * bm[k * n + j];
            }
            for (int j = 0; j < n; ++j) c[i * n + j] = static_cast<float>(row[j]);
        }
    }
}
