// L: strictly lower entries uniform in [-0.1, 0.1), diagonal uniform in [1.5, 2.5) (well conditioned),
// strictly upper entries uniform in [-50, 50): garbage that a correct solver never reads.
#include <cstddef>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
double unit(unsigned long long& s) { return static_cast<double>(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int batch, double* L, double* rhs, double* x) {
    (void)rhs; (void)x;
    unsigned long long s = seed;
    for (int b = 0; b < batch; ++b) {
        double* m = L + static_cast<std::size_t>(b) * 1024;
        for (int i = 0; i < 32; ++i)
            for (int j = 0; j < 32; ++j) {
                double u = unit(s);
                if (j < i) m[i * 32 + j] = 0.2 * u - 0.1;
                else if (j == i) m[i * 32 + j] = 1.5 + u;
                else m[i * 32 + j] = 100.0 * u - 50.0;
            }
    }
}
