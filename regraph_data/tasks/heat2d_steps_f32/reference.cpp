// Serial reference: ping-pong between two grids, boundary rows/columns copied unchanged.
#include <cstddef>
#include <vector>

extern "C" void heat2d_steps_f32(int ny, int nx, int steps, float r, float* u) {
    std::size_t total = static_cast<std::size_t>(ny) * nx;
    std::vector<float> a(u, u + total), b(a);
    for (int s = 0; s < steps; ++s) {
        for (int y = 1; y + 1 < ny; ++y)
            for (int x = 1; x + 1 < nx; ++x) {
                std::size_t i = static_cast<std::size_t>(y) * nx + x;
                float c = a[i];
                b[i] = c + r * (a[i - nx] + a[i + nx] + a[i + 1] + a[i - 1] - 4.0f * c);
            }
        a.swap(b);  // b keeps the (unchanged) boundary of a, so only the interior needs writing
    }
    for (std::size_t i = 0; i < total; ++i) u[i] = a[i];
}
