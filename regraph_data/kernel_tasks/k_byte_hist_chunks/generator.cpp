// Image-like bytes: each value is the mean of four uniform bytes, which piles the values up around
// 127 (a bell shape), so a few bins take most of the counts. splitmix64, deterministic per seed.
namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int chunks, int chunk_len, unsigned char* data, int* hist) {
    (void)hist;
    const unsigned long long n = static_cast<unsigned long long>(chunks) * static_cast<unsigned long long>(chunk_len);
    unsigned long long s = seed;
    for (unsigned long long i = 0; i < n; i += 2) {
        const unsigned long long r = splitmix64(s);
        const unsigned a = static_cast<unsigned>((r & 0xff) + ((r >> 8) & 0xff) + ((r >> 16) & 0xff) + ((r >> 24) & 0xff));
        const unsigned b = static_cast<unsigned>(((r >> 32) & 0xff) + ((r >> 40) & 0xff) + ((r >> 48) & 0xff) + (r >> 56));
        data[i] = static_cast<unsigned char>(a / 4);
        if (i + 1 < n) data[i + 1] = static_cast<unsigned char>(b / 4);
    }
}
