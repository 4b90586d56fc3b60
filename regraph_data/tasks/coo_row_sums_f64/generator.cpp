// Row ids: nnz uniform draws in [0, nrows), sorted (row lengths binomial around nnz/nrows, some
// rows empty).  splitmix64, deterministic per seed.
#include <algorithm>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int nrows, int nnz, int* row, double* val, double* out) {
    (void)val; (void)out;
    unsigned long long s = seed;
    for (int e = 0; e < nnz; ++e) row[e] = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(nrows));
    std::sort(row, row + nnz);
}
