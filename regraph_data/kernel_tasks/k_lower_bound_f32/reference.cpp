// Serial lower bounds by one merge-like sweep: the queries are visited in ascending order (ties by
// index), so the position in the sorted array only ever moves forward.
#include <algorithm>
#include <utility>
#include <vector>

extern "C" void lower_bound(int n, int q, const float* sorted, const float* queries, int* pos) {
    std::vector<std::pair<float, int>> order(q);
    for (int i = 0; i < q; ++i) order[i] = {queries[i], i};
    std::sort(order.begin(), order.end());
    int j = 0;
    for (const auto& [value, index] : order) {
        while (j < n && sorted[j] < value) ++j;
        pos[index] = j;
    }
}
