// Serial reference: squared Sobel gradient magnitude, zero on the border.
extern "C" void sobel_mag2_u8(int h, int w, const unsigned char* img, int* out) {
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            long long o = (long long)y * w + x;
            if (y == 0 || x == 0 || y == h - 1 || x == w - 1) { out[o] = 0; continue; }
            auto p = [&](int dy, int dx) { return (int)img[o + (long long)dy * w + dx]; };
            int gx = (p(-1, 1) + 2 * p(0, 1) + p(1, 1)) - (p(-1, -1) + 2 * p(0, -1) + p(1, -1));
            int gy = (p(1, -1) + 2 * p(1, 0) + p(1, 1)) - (p(-1, -1) + 2 * p(-1, 0) + p(-1, 1));
            out[o] = gx * gx + gy * gy;
        }
}
