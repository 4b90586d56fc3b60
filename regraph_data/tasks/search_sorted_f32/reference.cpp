// Serial reference: std::lower_bound for every query.
#include <algorithm>

extern "C" void search_sorted_f32(int n, int q, const float* keys, const float* queries, int* pos) {
    for (int i = 0; i < q; ++i) pos[i] = static_cast<int>(std::lower_bound(keys, keys + n, queries[i]) - keys);
}
