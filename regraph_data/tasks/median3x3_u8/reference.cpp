#include <algorithm>

// Serial reference: gather the clamped 3x3 neighbourhood and take the 5th smallest value.
extern "C" void median3x3_u8(int h, int w, const unsigned char* img, unsigned char* out) {
    unsigned char v[9];
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            int k = 0;
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx) {
                    const int yy = std::min(std::max(y + dy, 0), h - 1);
                    const int xx = std::min(std::max(x + dx, 0), w - 1);
                    v[k++] = img[(long long)yy * w + xx];
                }
            std::nth_element(v, v + 4, v + 9);
            out[(long long)y * w + x] = v[4];
        }
}
