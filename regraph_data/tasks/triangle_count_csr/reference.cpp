// Serial reference: for every oriented edge (v, u), merge-intersect N+(v) and N+(u).
extern "C" void triangle_count_csr(int n, int m_cap, const int* row_ptr, const int* col_idx, int* count) {
    (void)m_cap;
    for (int v = 0; v < n; ++v) {
        int c = 0;
        for (int p = row_ptr[v]; p < row_ptr[v + 1]; ++p) {
            int u = col_idx[p];
            int i = p + 1, j = row_ptr[u];
            while (i < row_ptr[v + 1] && j < row_ptr[u + 1]) {
                int a = col_idx[i], b = col_idx[j];
                if (a == b) { ++c; ++i; ++j; }
                else if (a < b) ++i;
                else ++j;
            }
        }
        count[v] = c;
    }
}
