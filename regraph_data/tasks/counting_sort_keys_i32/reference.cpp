// Serial reference: counting sort over the 1024 possible key values.
#include <vector>

extern "C" void counting_sort_keys_i32(int n, const int* keys, int* sorted) {
    std::vector<int> count(1024, 0);
    for (int i = 0; i < n; ++i) ++count[keys[i]];
    int pos = 0;
    for (int k = 0; k < 1024; ++k)
        for (int c = 0; c < count[k]; ++c) sorted[pos++] = k;
}
