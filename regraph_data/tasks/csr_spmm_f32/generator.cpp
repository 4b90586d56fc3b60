// CSR structure: each non-zero goes to a uniformly random row (binomial row lengths, some rows
// empty), each row gets sorted random column indices.  splitmix64, deterministic per seed.
#include <algorithm>
#include <vector>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int rows, int cols, int ncols, int nnz, int* row_ptr,
                                 int* col_idx, float* vals, float* B, float* C) {
    (void)ncols; (void)vals; (void)B; (void)C;
    unsigned long long s = seed;
    std::vector<int> count(rows, 0);
    for (int i = 0; i < nnz; ++i) ++count[splitmix64(s) % static_cast<unsigned long long>(rows)];
    row_ptr[0] = 0;
    for (int r = 0; r < rows; ++r) row_ptr[r + 1] = row_ptr[r] + count[r];
    for (int r = 0; r < rows; ++r) {
        for (int p = row_ptr[r]; p < row_ptr[r + 1]; ++p)
            col_idx[p] = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(cols));
        std::sort(col_idx + row_ptr[r], col_idx + row_ptr[r + 1]);
    }
}
