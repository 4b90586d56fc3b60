// Serial reference: std::lower_bound per query.
#include <algorithm>

extern "C" void lower_bound_i64(int n, int q, const long long* keys, const long long* queries, int* pos) {
    for (int i = 0; i < q; ++i) pos[i] = static_cast<int>(std::lower_bound(keys, keys + n, queries[i]) - keys);
}
