// Random directed multigraph: vertex u first gets one edge u -> random (so no vertex dangles), the
// remaining edges get uniformly random sources and targets. Stored as incoming CSR sorted by target,
// with the out-degree of every vertex. splitmix64 stream: deterministic for a seed.
#include <vector>

namespace {
struct SplitMix64 {
    unsigned long long s;
    unsigned long long next() {
        unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    int below(int bound) { return static_cast<int>(next() % static_cast<unsigned long long>(bound)); }
};
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int n, int m, int iters, int* in_ptr, int* in_src, int* out_deg,
                                 float* pr) {
    (void)iters; (void)pr;
    SplitMix64 rng{seed};
    std::vector<int> src(m), dst(m);
    for (int e = 0; e < m; ++e) {
        src[e] = e < n ? e : rng.below(n);
        dst[e] = rng.below(n);
    }
    for (int v = 0; v < n; ++v) out_deg[v] = 0;
    std::vector<int> fill(n + 1, 0);
    for (int e = 0; e < m; ++e) {
        ++out_deg[src[e]];
        ++fill[dst[e] + 1];
    }
    for (int v = 0; v < n; ++v) fill[v + 1] += fill[v];
    for (int v = 0; v <= n; ++v) in_ptr[v] = fill[v];
    for (int e = 0; e < m; ++e) in_src[fill[dst[e]]++] = src[e];
}
