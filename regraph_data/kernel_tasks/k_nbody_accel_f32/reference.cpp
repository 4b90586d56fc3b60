// Serial all-pairs softened gravity; the pair terms are computed in float and summed in double.
#include <cmath>

extern "C" void nbody_accel(int n, float soft2, const float* px, const float* py, const float* pz, const float* mass,
                            float* ax, float* ay, float* az) {
    for (int i = 0; i < n; ++i) {
        double sx = 0.0, sy = 0.0, sz = 0.0;
        for (int j = 0; j < n; ++j) {
            const float dx = px[j] - px[i];
            const float dy = py[j] - py[i];
            const float dz = pz[j] - pz[i];
            const float r2 = dx * dx + dy * dy + dz * dz + soft2;
            const float inv = 1.0f / std::sqrt(r2);
            const float s = mass[j] * inv * inv * inv;
            sx += dx * s;
            sy += dy * s;
            sz += dz * s;
        }
        ax[i] = static_cast<float>(sx);
        ay[i] = static_cast<float>(sy);
        az[i] = static_cast<float>(sz);
    }
}
