#include <algorithm>
#include <vector>

// Serial reference: counting-sort particles into cells of edge RC, then test the 27 surrounding cells.
extern "C" void cell_neighbor_count_i32(int n, const int* pos, int* count) {
    const int RC = 32768, G = 32;
    const long long RC2 = (long long)RC * RC;
    std::vector<int> start(G * G * G + 1, 0), order(n), cell(n);
    for (int i = 0; i < n; ++i) {
        cell[i] = ((pos[3 * i + 2] / RC) * G + pos[3 * i + 1] / RC) * G + pos[3 * i] / RC;
        ++start[cell[i] + 1];
    }
    for (int c = 0; c < G * G * G; ++c) start[c + 1] += start[c];
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (int i = 0; i < n; ++i) order[fill[cell[i]]++] = i;
    for (int i = 0; i < n; ++i) {
        const int x = pos[3 * i], y = pos[3 * i + 1], z = pos[3 * i + 2];
        const int cx = x / RC, cy = y / RC, cz = z / RC;
        int c = 0;
        for (int gz = std::max(cz - 1, 0); gz <= std::min(cz + 1, G - 1); ++gz)
            for (int gy = std::max(cy - 1, 0); gy <= std::min(cy + 1, G - 1); ++gy)
                for (int gx = std::max(cx - 1, 0); gx <= std::min(cx + 1, G - 1); ++gx) {
                    const int cc = (gz * G + gy) * G + gx;
                    for (int s = start[cc]; s < start[cc + 1]; ++s) {
                        const int j = order[s];
                        const long long dx = pos[3 * j] - x, dy = pos[3 * j + 1] - y, dz = pos[3 * j + 2] - z;
                        c += (j != i) && (dx * dx + dy * dy + dz * dz < RC2);
                    }
                }
        count[i] = c;
    }
}
