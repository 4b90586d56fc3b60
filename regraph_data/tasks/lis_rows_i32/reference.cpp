#include <algorithm>
#include <cstddef>
#include <vector>

// Serial reference: patience sorting; tails[k] is the smallest tail of an increasing subsequence of length k+1.
extern "C" void lis_rows_i32(int rows, int len, const int* a, int* out) {
    std::vector<int> tails;
    for (int r = 0; r < rows; ++r) {
        const int* row = a + (std::size_t)r * len;
        tails.clear();
        for (int i = 0; i < len; ++i) {
            auto it = std::lower_bound(tails.begin(), tails.end(), row[i]);  // strict: replace the first >= v
            if (it == tails.end()) tails.push_back(row[i]); else *it = row[i];
        }
        out[r] = (int)tails.size();
    }
}
