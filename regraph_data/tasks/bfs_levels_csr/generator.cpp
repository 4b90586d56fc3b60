// Random directed multigraph: each of the m edges gets a uniformly random source (so out-degrees
// are binomial around m/n, some vertices have none) and a uniformly random target; adjacency
// lists are sorted.  splitmix64, deterministic per seed.
#include <algorithm>
#include <vector>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int n, int m, int* row_ptr, int* col_idx, int* level) {
    (void)level;
    unsigned long long s = seed;
    std::vector<int> count(n, 0);
    for (int e = 0; e < m; ++e) ++count[splitmix64(s) % static_cast<unsigned long long>(n)];
    row_ptr[0] = 0;
    for (int v = 0; v < n; ++v) row_ptr[v + 1] = row_ptr[v] + count[v];
    for (int v = 0; v < n; ++v) {
        for (int j = row_ptr[v]; j < row_ptr[v + 1]; ++j)
            col_idx[j] = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(n));
        std::sort(col_idx + row_ptr[v], col_idx + row_ptr[v + 1]);
    }
}
