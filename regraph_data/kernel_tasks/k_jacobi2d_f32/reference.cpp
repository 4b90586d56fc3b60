// Serial 5-point Jacobi sweep; boundary cells keep their values.
extern "C" void jacobi2d(int rows, int cols, const float* u, float* v) {
    for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j) {
            const long long c = static_cast<long long>(i) * cols + j;
            if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) {
                v[c] = u[c];
            } else {
                v[c] = (u[c] + u[c - cols] + u[c + cols] + u[c - 1] + u[c + 1]) * 0.2f;
            }
        }
    }
}
