// Serial reference: one pass over the edge list.
extern "C" void degree_counts_i32(int n, int m, const int* src, const int* dst, int* out_deg, int* in_deg) {
    for (int v = 0; v < n; ++v) out_deg[v] = in_deg[v] = 0;
    for (int e = 0; e < m; ++e) {
        ++out_deg[src[e]];
        ++in_deg[dst[e]];
    }
}
