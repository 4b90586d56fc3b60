// Serial reference: brute-force neighbour sum with the poly6 kernel.
extern "C" void sph_density_f32(int n, float h, const float* pos, const float* mass, float* rho) {
    const float h2 = h * h;
    const float coef = 315.0f / (64.0f * 3.14159265358979f * h2 * h2 * h2 * h2 * h);
    for (int i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int j = 0; j < n; ++j) {
            const float dx = pos[3 * j] - pos[3 * i], dy = pos[3 * j + 1] - pos[3 * i + 1], dz = pos[3 * j + 2] - pos[3 * i + 2];
            const float r2 = dx * dx + dy * dy + dz * dz;
            if (r2 < h2) { const float d = h2 - r2; acc += mass[j] * d * d * d; }
        }
        rho[i] = coef * acc;
    }
}
