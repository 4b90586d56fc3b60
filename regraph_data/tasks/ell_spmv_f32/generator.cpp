// ELL structure: row r uses len(r) uniform in [0, K] leading slots with random columns; the other
// slots are padding (column -1, value 0).  splitmix64, deterministic per seed.
namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int rows, int cols, int K, int* ell_col, float* ell_val,
                                 float* x, float* y) {
    (void)x; (void)y;
    unsigned long long s = seed;
    for (int r = 0; r < rows; ++r) {
        int len = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(K + 1));
        for (int k = 0; k < K; ++k) {
            long long slot = static_cast<long long>(k) * rows + r;
            if (k < len) {
                ell_col[slot] = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(cols));
            } else {
                ell_col[slot] = -1;
                ell_val[slot] = 0.0f;
            }
        }
    }
}
