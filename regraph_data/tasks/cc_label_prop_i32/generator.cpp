// e = m/2 undirected edges: even-numbered ones join u and u+1..u+4 (a random vertex if that runs
// past n), odd-numbered ones join two random vertices.  Both directions are stored; adjacency lists
// are grouped by source with a counting sort and sorted.  splitmix64, deterministic per seed.
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

extern "C" void regraph_generate(unsigned long long seed, int n, int m, int* row_ptr, int* col_idx, int* label) {
    (void)label;
    unsigned long long s = seed;
    int e = m / 2;
    std::vector<int> eu(e), ev(e), deg(n, 0);
    for (int i = 0; i < e; ++i) {
        int u = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(n));
        int v;
        if (i % 2 == 0) {
            v = u + 1 + static_cast<int>(splitmix64(s) % 4);
            if (v >= n) v = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(n));
        } else {
            v = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(n));
        }
        eu[i] = u;
        ev[i] = v;
        ++deg[u];
        ++deg[v];
    }
    row_ptr[0] = 0;
    for (int v = 0; v < n; ++v) row_ptr[v + 1] = row_ptr[v] + deg[v];
    std::vector<int> fill(row_ptr, row_ptr + n);
    for (int i = 0; i < e; ++i) {
        col_idx[fill[eu[i]]++] = ev[i];
        col_idx[fill[ev[i]]++] = eu[i];
    }
    for (int v = 0; v < n; ++v) std::sort(col_idx + row_ptr[v], col_idx + row_ptr[v + 1]);
}
