// Serial reference: Jacobi-style rounds with two distance arrays.
#include <vector>

extern "C" void bellman_ford_rounds_f32(int n, int m, int rounds, const int* row_ptr, const int* src, const float* w,
                                        float* dist) {
    (void)m;
    std::vector<float> cur(n, 1e30f), next(n);
    if (n > 0) cur[0] = 0.0f;
    for (int r = 0; r < rounds; ++r) {
        for (int v = 0; v < n; ++v) {
            float best = cur[v];
            for (int p = row_ptr[v]; p < row_ptr[v + 1]; ++p) {
                float cand = cur[src[p]] + w[p];
                if (cand < best) best = cand;
            }
            next[v] = best;
        }
        cur.swap(next);
    }
    for (int v = 0; v < n; ++v) dist[v] = cur[v];
}
