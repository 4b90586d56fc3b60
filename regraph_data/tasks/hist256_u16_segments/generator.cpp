// Each uint16 sample is the sum of four uniform 14-bit values (0..65532, peaked around 32766), so a
// few dozen bins get most samples, as with real sensor data.  splitmix64, deterministic per seed.
#include <cstddef>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
unsigned int sample(unsigned long long& s) {
    unsigned long long r = splitmix64(s);
    return static_cast<unsigned int>((r & 0x3FFF) + ((r >> 14) & 0x3FFF) + ((r >> 28) & 0x3FFF) + ((r >> 42) & 0x3FFF));
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int nseg, int seg_words, unsigned int* data, int* hist) {
    (void)hist;
    unsigned long long s = seed;
    std::size_t total = static_cast<std::size_t>(nseg) * seg_words;
    for (std::size_t i = 0; i < total; ++i) data[i] = sample(s) | (sample(s) << 16);
}
