// Serial Horner evaluation. Elements are processed in blocks with the coefficient loop outside the
// element loop, so the compiler can vectorise across elements; each element still sees exactly the
// Horner sequence y = y*x + c[k] for k = degree-1 .. 0.
extern "C" void poly_horner(int n, int degree, const float* coeffs, const float* x, float* y) {
    const int block = 1024;
    for (int start = 0; start < n; start += block) {
        const int end = start + block < n ? start + block : n;
        for (int i = start; i < end; ++i) y[i] = coeffs[degree];
        for (int k = degree - 1; k >= 0; --k) {
            const float c = coeffs[k];
            for (int i = start; i < end; ++i) y[i] = y[i] * x[i] + c;
        }
    }
}
