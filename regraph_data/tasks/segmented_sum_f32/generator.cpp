// Segment boundaries: nseg-1 uniformly random cut points in [0, n], sorted, so lengths vary
// (roughly exponential around n/nseg, with empty segments).  splitmix64, deterministic per seed.
#include <algorithm>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int nseg, int n, int* seg_ptr, float* values, float* out) {
    (void)values; (void)out;
    unsigned long long s = seed;
    seg_ptr[0] = 0;
    seg_ptr[nseg] = n;
    for (int i = 1; i < nseg; ++i) seg_ptr[i] = static_cast<int>(splitmix64(s) % (static_cast<unsigned long long>(n) + 1));
    std::sort(seg_ptr + 1, seg_ptr + nseg);
}
