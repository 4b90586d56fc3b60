#include <cmath>

// Serial reference: direct O(n^2) summation in float (the self term contributes zero).
extern "C" void nbody_accel_f32(int n, const float* body, float* acc) {
    const float eps2 = 0.01f;
    for (int i = 0; i < n; ++i) {
        const float xi = body[4 * i], yi = body[4 * i + 1], zi = body[4 * i + 2];
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        for (int j = 0; j < n; ++j) {
            const float dx = body[4 * j] - xi, dy = body[4 * j + 1] - yi, dz = body[4 * j + 2] - zi;
            const float d2 = dx * dx + dy * dy + dz * dz + eps2;
            const float inv = 1.0f / std::sqrt(d2);
            const float s = body[4 * j + 3] * inv * inv * inv;
            ax += s * dx; ay += s * dy; az += s * dz;
        }
        acc[3 * i] = ax / n; acc[3 * i + 1] = ay / n; acc[3 * i + 2] = az / n;
    }
}
