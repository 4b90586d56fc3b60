// Edge endpoints uniform in [0, n) (the vertex count differs between sizes, so a fixed randint
// range cannot be used); sources skewed towards low ids by taking the smaller of two draws, so
// out-degrees are uneven.  splitmix64, deterministic per seed.
namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int n, int m, int* src, int* dst, int* out_deg, int* in_deg) {
    (void)out_deg; (void)in_deg;
    unsigned long long s = seed;
    unsigned long long un = static_cast<unsigned long long>(n);
    for (int e = 0; e < m; ++e) {
        unsigned long long a = splitmix64(s) % un, b = splitmix64(s) % un;
        src[e] = static_cast<int>(a < b ? a : b);
        dst[e] = static_cast<int>(splitmix64(s) % un);
    }
}
