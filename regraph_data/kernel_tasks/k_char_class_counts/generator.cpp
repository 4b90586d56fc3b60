// Text-like bytes: words of letters separated by spaces, with digits, punctuation, tabs, newlines and
// the occasional byte outside printable ASCII. splitmix64, deterministic per seed.
namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int chunks, int chunk_len, unsigned char* text, int* counts) {
    (void)counts;
    static const char punctuation[] = ".,;:!?-'\"()[]{}<>/@#$%&*+=_~|\\^`";
    const unsigned long long n = static_cast<unsigned long long>(chunks) * static_cast<unsigned long long>(chunk_len);
    unsigned long long s = seed;
    unsigned long long bits = 0;
    for (unsigned long long i = 0; i < n; ++i) {
        // Each splitmix64 output feeds two bytes, 32 bits each.
        if (i % 2 == 0) bits = splitmix64(s);
        const unsigned long long r = i % 2 == 0 ? bits & 0xffffffffull : bits >> 32;
        const unsigned p = static_cast<unsigned>(r % 1000ull);
        const unsigned long long v = r >> 10;
        unsigned char ch;
        if (p < 600) {
            ch = static_cast<unsigned char>((v & 1ull ? 'a' : 'A') + (v >> 1) % 26ull);
        } else if (p < 750) {
            ch = ' ';
        } else if (p < 830) {
            ch = static_cast<unsigned char>('0' + v % 10ull);
        } else if (p < 850) {
            ch = '\n';
        } else if (p < 860) {
            ch = '\t';
        } else if (p < 865) {
            ch = '\r';
        } else if (p < 990) {
            ch = static_cast<unsigned char>(punctuation[v % (sizeof(punctuation) - 1)]);
        } else {
            ch = static_cast<unsigned char>(128 + v % 128ull);
        }
        text[i] = ch;
    }
}
