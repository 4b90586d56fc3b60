// Ascending runs built from random increments in 0..3 (so about a quarter of neighbours are equal),
// both arrays spanning about the same value range so that they interleave finely.  O(n), splitmix64.
namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
void fill(unsigned long long& s, int n, int span, int* v) {
    long long x = static_cast<long long>(splitmix64(s) % 8);
    // Mean increment chosen so that the array covers about [0, span).
    unsigned long long step = n > 0 ? static_cast<unsigned long long>(2 * static_cast<long long>(span) / n) + 1 : 1;
    for (int i = 0; i < n; ++i) {
        x += static_cast<long long>(splitmix64(s) % step);
        v[i] = static_cast<int>(x);
    }
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int na, int nb, int* a, int* b, int* out) {
    (void)out;
    unsigned long long s = seed;
    int span = na > nb ? na : nb;
    fill(s, na, span, a);
    fill(s, nb, span, b);
}
