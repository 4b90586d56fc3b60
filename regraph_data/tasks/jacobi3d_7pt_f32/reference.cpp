// Serial reference: one sweep, boundary copied.
#include <cstddef>

extern "C" void jacobi3d_7pt_f32(int nz, int ny, int nx, const float* u, float* out) {
    const std::size_t sy = static_cast<std::size_t>(nx), sz = static_cast<std::size_t>(nx) * ny;
    for (int z = 0; z < nz; ++z)
        for (int y = 0; y < ny; ++y)
            for (int x = 0; x < nx; ++x) {
                std::size_t i = z * sz + y * sy + x;
                if (z == 0 || y == 0 || x == 0 || z == nz - 1 || y == ny - 1 || x == nx - 1) {
                    out[i] = u[i];
                } else {
                    float nb = u[i - sz] + u[i + sz] + u[i - sy] + u[i + sy] + u[i - 1] + u[i + 1];
                    out[i] = 0.4f * u[i] + 0.1f * nb;
                }
            }
}
