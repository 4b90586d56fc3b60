// Segment offsets: every segment gets one point, the remaining npts - nseg points go to uniformly random
// segments (lengths are then binomially spread around npts/nseg). Deterministic for a seed: a splitmix64
// stream, no library distributions. Requires npts >= nseg (true for both size sets).
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
};
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int nseg, int npts, int* seg_start, float* pts, float* bbox) {
    (void)pts; (void)bbox;
    SplitMix64 rng{seed};
    std::vector<int> count(nseg, 1);
    for (int k = nseg; k < npts; ++k) ++count[rng.next() % (unsigned long long)nseg];
    seg_start[0] = 0;
    for (int s = 0; s < nseg; ++s) seg_start[s + 1] = seg_start[s] + count[s];
}
