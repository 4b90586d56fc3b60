#include <algorithm>
#include <cstddef>
#include <vector>

// Serial reference: two-row Smith-Waterman with linear gap penalty, best cell tracked.
extern "C" void smith_waterman_pairs_i32(int npairs, int len, const unsigned char* a, const unsigned char* b, int* out) {
    std::vector<int> prev(len + 1), cur(len + 1);
    for (int p = 0; p < npairs; ++p) {
        const unsigned char* s = a + (std::size_t)p * len;
        const unsigned char* t = b + (std::size_t)p * len;
        std::fill(prev.begin(), prev.end(), 0);
        int best = 0;
        for (int i = 1; i <= len; ++i) {
            cur[0] = 0;
            for (int j = 1; j <= len; ++j) {
                const int diag = prev[j - 1] + (s[i - 1] == t[j - 1] ? 2 : -1);
                cur[j] = std::max({0, diag, prev[j] - 2, cur[j - 1] - 2});
                best = std::max(best, cur[j]);
            }
            std::swap(prev, cur);
        }
        out[p] = best;
    }
}
