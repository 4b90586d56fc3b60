// A random CSR structure with skewed row lengths: half of the entries fall on uniformly random rows,
// the other half on row floor(rows * u^2) for uniform u, which piles thousands of entries onto the
// first rows and leaves many rows empty. Columns are uniform and sorted within each row.
// splitmix64, deterministic per seed.
#include <algorithm>
#include <vector>

namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double unit(unsigned long long& s) { return static_cast<double>(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int rows, int cols, int nnz, int* row_ptr, int* col_idx,
                                 float* vals, float* x, float* y) {
    (void)vals;
    (void)x;
    (void)y;
    unsigned long long s = seed;
    std::vector<int> count(rows, 0);
    for (int e = 0; e < nnz; ++e) {
        int r;
        if (e % 2 == 0) {
            r = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(rows));
        } else {
            const double u = unit(s);
            r = static_cast<int>(u * u * rows);
            if (r >= rows) r = rows - 1;
        }
        ++count[r];
    }
    row_ptr[0] = 0;
    for (int r = 0; r < rows; ++r) row_ptr[r + 1] = row_ptr[r] + count[r];
    for (int r = 0; r < rows; ++r) {
        for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e)
            col_idx[e] = static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(cols));
        std::sort(col_idx + row_ptr[r], col_idx + row_ptr[r + 1]);
    }
}
