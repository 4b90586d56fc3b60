// Oriented random graph with locality: vertex v draws an out-degree in 1..2d-1 (d = m_cap/(2n)) and
// that many distinct neighbours from v+1..v+48 (fewer near the end of the id range), sorted.  The
// unused tail of col_idx is zero.  splitmix64, deterministic per seed.
namespace {
unsigned long long splitmix64(unsigned long long& s) {
    unsigned long long z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

extern "C" void regraph_generate(unsigned long long seed, int n, int m_cap, int* row_ptr, int* col_idx, int* count) {
    (void)count;
    const int W = 48;
    unsigned long long s = seed;
    int d = n > 0 ? m_cap / (2 * n) : 1;
    if (d < 1) d = 1;
    int pos = 0;
    row_ptr[0] = 0;
    for (int v = 0; v < n; ++v) {
        int avail = n - 1 - v < W ? n - 1 - v : W;
        int want = 1 + static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(2 * d - 1));
        if (want > avail) want = avail;
        int off[W];
        for (int i = 0; i < avail; ++i) off[i] = i + 1;
        for (int i = 0; i < want; ++i) {  // partial Fisher-Yates: want distinct offsets
            int j = i + static_cast<int>(splitmix64(s) % static_cast<unsigned long long>(avail - i));
            int t = off[i]; off[i] = off[j]; off[j] = t;
        }
        for (int i = 1; i < want; ++i)  // insertion sort of the chosen offsets
            for (int j = i; j > 0 && off[j - 1] > off[j]; --j) { int t = off[j]; off[j] = off[j - 1]; off[j - 1] = t; }
        for (int i = 0; i < want; ++i) col_idx[pos++] = v + off[i];
        row_ptr[v + 1] = pos;
    }
    for (int i = pos; i < m_cap; ++i) col_idx[i] = 0;
}
