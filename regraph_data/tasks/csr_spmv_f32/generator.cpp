// CSR structure: every non-zero is assigned to a uniformly random row (row lengths are then
// binomially distributed around k, some rows empty at small k), and each row gets sorted random
// column indices. Deterministic for a seed: a splitmix64 stream, no library distributions.
#include <algorithm>
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
    int below(int bound) { return static_cast<int>(next() % static_cast<unsigned long long>(bound)); }
};
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int rows, int cols, int nnz, int* row_ptr, int* col_idx,
                                 float* vals, float* x, float* y) {
    (void)vals; (void)x; (void)y;
    SplitMix64 rng{seed};
    std::vector<int> count(rows, 0);
    for (int i = 0; i < nnz; ++i) ++count[rng.below(rows)];
    row_ptr[0] = 0;
    for (int r = 0; r < rows; ++r) row_ptr[r + 1] = row_ptr[r] + count[r];
    for (int r = 0; r < rows; ++r) {
        int* begin = col_idx + row_ptr[r];
        int* end = col_idx + row_ptr[r + 1];
        for (int* p = begin; p != end; ++p) *p = rng.below(cols);
        std::sort(begin, end);
    }
}
