// Incoming-edge CSR: each of the m edges gets a uniformly random destination (in-degrees binomial
// around m/n); its source is a nearby lower id (v-1..v-16) for half the edges and a random vertex
// otherwise, so paths are long and short-cuts exist.  splitmix64, deterministic per seed.
#include <vector>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int n, int m, int rounds, int* row_ptr, int* src, float* w,
                                 float* dist) {
    (void)rounds; (void)w; (void)dist;
    unsigned long long s = seed;
    std::vector<int> count(n, 0);
    for (int e = 0; e < m; ++e) ++count[splitmix64(s) % static_cast<unsigned long long>(n)];
    row_ptr[0] = 0;
    for (int v = 0; v < n; ++v) row_ptr[v + 1] = row_ptr[v] + count[v];
    for (int v = 0; v < n; ++v)
        for (int p = row_ptr[v]; p < row_ptr[v + 1]; ++p) {
            unsigned long long r = splitmix64(s);
            int near = v - 1 - static_cast<int>((r >> 1) % 16);
            src[p] = ((r & 1) && near >= 0) ? near : static_cast<int>((r >> 8) % static_cast<unsigned long long>(n));
        }
}
