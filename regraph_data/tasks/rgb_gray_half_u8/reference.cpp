// Serial reference: integer luma, then a rounded 2x2 box downscale.
static inline int gray(const unsigned char* p) { return (77 * p[0] + 150 * p[1] + 29 * p[2] + 128) >> 8; }

extern "C" void rgb_gray_half_u8(int h, int w, const unsigned char* rgb, unsigned char* out) {
    const int h2 = h / 2, w2 = w / 2;
    for (int y = 0; y < h2; ++y)
        for (int x = 0; x < w2; ++x) {
            const unsigned char* p = rgb + ((long long)(2 * y) * w + 2 * x) * 3;
            const unsigned char* q = p + (long long)w * 3;
            const int s = gray(p) + gray(p + 3) + gray(q) + gray(q + 3);
            out[(long long)y * w2 + x] = (unsigned char)((s + 2) >> 2);
        }
}
