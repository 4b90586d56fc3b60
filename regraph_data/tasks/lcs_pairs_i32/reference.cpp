#include <algorithm>
#include <cstddef>
#include <vector>

// Serial reference: the classic two-row LCS dynamic programme per pair.
extern "C" void lcs_pairs_i32(int npairs, int len, const unsigned char* a, const unsigned char* b, int* out) {
    std::vector<int> prev(len + 1), cur(len + 1);
    for (int p = 0; p < npairs; ++p) {
        const unsigned char* s = a + (std::size_t)p * len;
        const unsigned char* t = b + (std::size_t)p * len;
        std::fill(prev.begin(), prev.end(), 0);
        for (int i = 1; i <= len; ++i) {
            cur[0] = 0;
            for (int j = 1; j <= len; ++j)
                cur[j] = s[i - 1] == t[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
            std::swap(prev, cur);
        }
        out[p] = prev[len];
    }
}
