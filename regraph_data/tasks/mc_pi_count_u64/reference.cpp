// Counter-based generator: a stateless hash of (seed, index), identical on CPU and GPU.
static inline unsigned long long splitmix64(unsigned long long z) {
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27; z *= 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Serial reference: count 24-bit lattice points inside the quarter circle.
extern "C" void mc_pi_count_u64(long long npoints, unsigned long long seed, unsigned long long* count) {
    unsigned long long inside = 0;
    for (long long i = 0; i < npoints; ++i) {
        const unsigned long long h = splitmix64(seed + (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ULL);
        const unsigned long long x = h >> 40, y = (h >> 16) & 0xFFFFFFULL;
        inside += (x * x + y * y < (1ULL << 48)) ? 1 : 0;
    }
    count[0] = inside;
}
