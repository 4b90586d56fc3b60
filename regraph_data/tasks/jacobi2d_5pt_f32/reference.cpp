// Serial reference: ping-pong between two grids; interior cells become the average of their four
// neighbours, boundary cells are copied unchanged.
#include <cstddef>
#include <vector>

extern "C" void jacobi2d_5pt_f32(int nx, int ny, int iters, const float* in, float* out) {
    std::size_t cells = static_cast<std::size_t>(nx) * ny;
    std::vector<float> a(in, in + cells), b(in, in + cells);
    for (int it = 0; it < iters; ++it) {
        for (int y = 1; y < ny - 1; ++y)
            for (int x = 1; x < nx - 1; ++x) {
                std::size_t c = static_cast<std::size_t>(y) * nx + x;
                b[c] = 0.25f * (a[c - 1] + a[c + 1] + a[c - nx] + a[c + nx]);
            }
        a.swap(b);
    }
    for (std::size_t i = 0; i < cells; ++i) out[i] = a[i];
}
