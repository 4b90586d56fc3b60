// Serial reference. Fixed point keeps the result independent of floating-point contraction and rounding.
extern "C" void mandelbrot_q28_i32(int h, int w, int maxit, int* iters) {
    const long long one = 1LL << 28;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const long long cr = -5 * one / 2 + (long long)x * (7 * one / 2) / w;
            const long long ci = -5 * one / 4 + (long long)y * (5 * one / 2) / h;
            long long zr = 0, zi = 0;
            int it = 0;
            while (it < maxit) {
                const long long zr2 = (zr * zr) >> 28, zi2 = (zi * zi) >> 28;
                if (zr2 + zi2 > 4 * one) break;
                zi = ((zr * zi) >> 27) + ci;
                zr = zr2 - zi2 + cr;
                ++it;
            }
            iters[(long long)y * w + x] = it;
        }
}
