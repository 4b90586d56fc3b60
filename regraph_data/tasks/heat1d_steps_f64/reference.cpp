// Serial reference: two buffers, end points copied unchanged.
#include <cstddef>
#include <vector>

extern "C" void heat1d_steps_f64(int n, int steps, double r, double* u) {
    std::vector<double> a(u, u + n), b(a);
    for (int s = 0; s < steps; ++s) {
        for (int i = 1; i + 1 < n; ++i) b[i] = a[i] + r * (a[i - 1] - 2.0 * a[i] + a[i + 1]);
        a.swap(b);  // both buffers hold the fixed end points
    }
    for (int i = 0; i < n; ++i) u[i] = a[static_cast<std::size_t>(i)];
}
