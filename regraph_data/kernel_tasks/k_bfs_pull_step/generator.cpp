// A random directed graph (each in-edge gets a uniform target vertex v and a uniform source u; in-
// adjacency lists sorted) and a BFS state in the middle of a traversal: about 30% of the vertices
// visited, about 4% of them in the current frontier (a subset of the visited ones; vertex seed % n
// is always in it). splitmix64, deterministic per seed.
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

extern "C" void regraph_generate(unsigned long long seed, int n, int nnz, int* row_ptr, int* col_idx,
                                 unsigned char* frontier, unsigned char* visited, unsigned char* next) {
    (void)next;
    unsigned long long s = seed;
    const unsigned long long un = static_cast<unsigned long long>(n);
    std::vector<int> count(n, 0);
    for (int e = 0; e < nnz; ++e) ++count[splitmix64(s) % un];
    row_ptr[0] = 0;
    for (int v = 0; v < n; ++v) row_ptr[v + 1] = row_ptr[v] + count[v];
    for (int v = 0; v < n; ++v) {
        for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) col_idx[e] = static_cast<int>(splitmix64(s) % un);
        std::sort(col_idx + row_ptr[v], col_idx + row_ptr[v + 1]);
    }
    for (int v = 0; v < n; ++v) {
        const unsigned long long r = splitmix64(s) % 1000ull;
        frontier[v] = r < 40 ? 1 : 0;
        visited[v] = r < 300 ? 1 : 0;
    }
    const int start = static_cast<int>(seed % un);
    frontier[start] = 1;
    visited[start] = 1;
}
