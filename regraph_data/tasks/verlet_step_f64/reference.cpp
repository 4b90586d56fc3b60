#include <cmath>
#include <vector>

// Serial reference: half kick + drift, direct O(n^2) forces at the new positions, second half kick.
extern "C" void verlet_step_f64(int n, double dt, double* pos, double* vel, double* acc) {
    const double eps2 = 0.01;
    for (int k = 0; k < 3 * n; ++k) {
        vel[k] += 0.5 * dt * acc[k];
        pos[k] += dt * vel[k];
    }
    std::vector<double> anew(3 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        const double xi = pos[3 * i], yi = pos[3 * i + 1], zi = pos[3 * i + 2];
        double ax = 0.0, ay = 0.0, az = 0.0;
        for (int j = 0; j < n; ++j) {
            const double dx = pos[3 * j] - xi, dy = pos[3 * j + 1] - yi, dz = pos[3 * j + 2] - zi;
            const double inv = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
            const double s = inv * inv * inv;
            ax += s * dx; ay += s * dy; az += s * dz;
        }
        anew[3 * i] = ax / n; anew[3 * i + 1] = ay / n; anew[3 * i + 2] = az / n;
    }
    for (int k = 0; k < 3 * n; ++k) {
        acc[k] = anew[k];
        vel[k] += 0.5 * dt * acc[k];
    }
}
