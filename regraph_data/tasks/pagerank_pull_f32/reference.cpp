// Serial reference: pull-based PageRank in double precision, rounded to float at the end.
#include <vector>

extern "C" void pagerank_pull_f32(int n, int m, int iters, const int* in_ptr, const int* in_src, const int* out_deg,
                                  float* pr) {
    (void)m;
    const double d = 0.85;
    std::vector<double> cur(n, 1.0 / n), next(n), contrib(n);
    for (int it = 0; it < iters; ++it) {
        for (int u = 0; u < n; ++u) contrib[u] = cur[u] / out_deg[u];
        for (int v = 0; v < n; ++v) {
            double acc = 0.0;
            for (int e = in_ptr[v]; e < in_ptr[v + 1]; ++e) acc += contrib[in_src[e]];
            next[v] = (1.0 - d) / n + d * acc;
        }
        cur.swap(next);
    }
    for (int v = 0; v < n; ++v) pr[v] = static_cast<float>(cur[v]);
}
