#include <algorithm>
#include <vector>

// Serial reference: classic two-row Wagner-Fischer DP per pair.
extern "C" void edit_distance_pairs_u8(int npairs, int len, const unsigned char* a, const unsigned char* b, int* dist) {
    std::vector<int> prev(len + 1), cur(len + 1);
    for (int p = 0; p < npairs; ++p) {
        const unsigned char* s = a + (long long)p * len;
        const unsigned char* t = b + (long long)p * len;
        for (int j = 0; j <= len; ++j) prev[j] = j;
        for (int i = 1; i <= len; ++i) {
            cur[0] = i;
            for (int j = 1; j <= len; ++j)
                cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (s[i - 1] != t[j - 1] ? 1 : 0)});
            std::swap(prev, cur);
        }
        dist[p] = prev[len];
    }
}
