#include <cfloat>

// Serial reference: scan all points per query, keeping a sorted list of the 8 best by insertion.
extern "C" void knn_dist_f32(int nq, int np, const float* q, const float* p, float* dist) {
    const int K = 8;
    for (int i = 0; i < nq; ++i) {
        float best[K];
        for (int s = 0; s < K; ++s) best[s] = FLT_MAX;
        const float qx = q[3 * i], qy = q[3 * i + 1], qz = q[3 * i + 2];
        for (int j = 0; j < np; ++j) {
            const float dx = p[3 * j] - qx, dy = p[3 * j + 1] - qy, dz = p[3 * j + 2] - qz;
            const float d = dx * dx + dy * dy + dz * dz;
            if (d >= best[K - 1]) continue;
            int s = K - 1;
            while (s > 0 && best[s - 1] > d) { best[s] = best[s - 1]; --s; }
            best[s] = d;
        }
        for (int s = 0; s < K; ++s) dist[K * i + s] = best[s];
    }
}
