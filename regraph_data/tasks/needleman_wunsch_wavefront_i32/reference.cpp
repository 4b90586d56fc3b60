#include <algorithm>
#include <vector>

// Serial reference: row-by-row DP with two rows.
extern "C" void needleman_wunsch_wavefront_i32(int n, int m, const unsigned char* a, const unsigned char* b, int* last_row) {
    std::vector<int> prev(m + 1), cur(m + 1);
    for (int j = 0; j <= m; ++j) prev[j] = -j;
    for (int i = 1; i <= n; ++i) {
        cur[0] = -i;
        for (int j = 1; j <= m; ++j)
            cur[j] = std::max(prev[j - 1] + (a[i - 1] == b[j - 1] ? 1 : -1), std::max(prev[j], cur[j - 1]) - 1);
        std::swap(prev, cur);
    }
    for (int j = 0; j <= m; ++j) last_row[j] = prev[j];
}
