// Serial reference: union-find with path halving, then every vertex takes its set's smallest id.
#include <vector>

namespace {
int find_root(std::vector<int>& parent, int v) {
    while (parent[v] != v) {
        parent[v] = parent[parent[v]];
        v = parent[v];
    }
    return v;
}
}  // namespace

extern "C" void cc_label_prop_i32(int n, int m, const int* row_ptr, const int* col_idx, int* label) {
    (void)m;
    std::vector<int> parent(n);
    for (int v = 0; v < n; ++v) parent[v] = v;
    for (int v = 0; v < n; ++v)
        for (int p = row_ptr[v]; p < row_ptr[v + 1]; ++p) {
            int a = find_root(parent, v), b = find_root(parent, col_idx[p]);
            if (a != b) parent[a < b ? b : a] = a < b ? a : b;  // the smaller root wins
        }
    for (int v = 0; v < n; ++v) label[v] = find_root(parent, v);
}
