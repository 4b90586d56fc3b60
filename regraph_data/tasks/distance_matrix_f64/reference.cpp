#include <cmath>
#include <cstddef>

// Serial reference: direct evaluation of every pair.
extern "C" void distance_matrix_f64(int m, int n, int dim, const double* a, const double* b, double* d) {
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            double s = 0.0;
            for (int k = 0; k < dim; ++k) {
                const double t = a[(std::size_t)i * dim + k] - b[(std::size_t)j * dim + k];
                s += t * t;
            }
            d[(std::size_t)i * n + j] = std::sqrt(s);
        }
}
