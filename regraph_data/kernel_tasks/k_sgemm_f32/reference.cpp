// Serial matrix product in i-p-j order (unit stride over B and C), accumulated in double.
#include <vector>

extern "C" void sgemm(int m, int n, int k, const float* a, const float* b, float* c) {
    std::vector<double> acc(n);
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) acc[j] = 0.0;
        for (int p = 0; p < k; ++p) {
            const double aip = a[static_cast<long long>(i) * k + p];
            const float* brow = b + static_cast<long long>(p) * n;
            for (int j = 0; j < n; ++j) acc[j] += aip * brow[j];
        }
        for (int j = 0; j < n; ++j) c[static_cast<long long>(i) * n + j] = static_cast<float>(acc[j]);
    }
}
