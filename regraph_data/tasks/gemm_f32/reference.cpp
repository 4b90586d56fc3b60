// Serial reference: i-k-j loop order (unit stride over B and C), double accumulators per output row.
#include <cstddef>
#include <vector>

extern "C" void gemm_f32(int M, int N, int K, const float* A, const float* B, float* C) {
    std::vector<double> row(N);
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) row[j] = 0.0;
        for (int k = 0; k < K; ++k) {
            double a = A[static_cast<std::size_t>(i) * K + k];
            const float* b = B + static_cast<std::size_t>(k) * N;
            for (int j = 0; j < N; ++j) row[j] += a * b[j];
        }
        for (int j = 0; j < N; ++j) C[static_cast<std::size_t>(i) * N + j] = static_cast<float>(row[j]);
    }
}
