// Serial reference: partial_sort of the column indices by (value descending, index ascending).
#include <algorithm>
#include <cstddef>
#include <vector>

extern "C" void topk_rows_f32(int rows, int cols, int k, const float* x, float* vals, int* idx) {
    std::vector<int> order(cols);
    for (int r = 0; r < rows; ++r) {
        const float* row = x + static_cast<std::size_t>(r) * cols;
        for (int c = 0; c < cols; ++c) order[c] = c;
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int a, int b) {
            return row[a] > row[b] || (row[a] == row[b] && a < b);
        });
        for (int t = 0; t < k; ++t) {
            vals[static_cast<std::size_t>(r) * k + t] = row[order[t]];
            idx[static_cast<std::size_t>(r) * k + t] = order[t];
        }
    }
}
