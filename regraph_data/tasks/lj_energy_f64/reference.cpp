// Serial reference: all pairs, shifted LJ potential inside the cutoff (the shift makes it continuous at rc).
extern "C" void lj_energy_f64(int n, double rc, const double* pos, double* energy) {
    const double rc2 = rc * rc;
    const double irc6 = 1.0 / (rc2 * rc2 * rc2);
    const double shift = 4.0 * (irc6 * irc6 - irc6);
    for (int i = 0; i < n; ++i) {
        double e = 0.0;
        for (int j = 0; j < n; ++j) {
            if (j == i) continue;
            const double dx = pos[3 * j] - pos[3 * i], dy = pos[3 * j + 1] - pos[3 * i + 1], dz = pos[3 * j + 2] - pos[3 * i + 2];
            const double r2 = dx * dx + dy * dy + dz * dz;
            if (r2 < rc2) {
                const double ir6 = 1.0 / (r2 * r2 * r2);
                e += 4.0 * (ir6 * ir6 - ir6) - shift;
            }
        }
        energy[i] = e;
    }
}
