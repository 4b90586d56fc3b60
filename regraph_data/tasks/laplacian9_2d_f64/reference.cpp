// Serial reference: the 9-point stencil at interior points, zero on the one-cell boundary.
#include <cstddef>

extern "C" void laplacian9_2d_f64(int ny, int nx, double h, const double* u, double* out) {
    double scale = 1.0 / (6.0 * h * h);
    for (int y = 0; y < ny; ++y) {
        for (int x = 0; x < nx; ++x) {
            std::size_t i = static_cast<std::size_t>(y) * nx + x;
            if (y == 0 || x == 0 || y == ny - 1 || x == nx - 1) {
                out[i] = 0.0;
                continue;
            }
            double edges = u[i - nx] + u[i + nx] + u[i - 1] + u[i + 1];
            double corners = u[i - nx - 1] + u[i - nx + 1] + u[i + nx - 1] + u[i + nx + 1];
            out[i] = (4.0 * edges + corners - 20.0 * u[i]) * scale;
        }
    }
}
