#include <cstddef>

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Serial reference: 5x5 mean filter with clamp-to-edge borders. The 25 taps are summed in
// row-major order, then scaled by 1/25.
extern "C" void box_filter5x5_f32(int h, int w, const float* img, float* out) {
    const int R = 2;
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            float acc = 0.0f;
            for (int dy = -R; dy <= R; ++dy) {
                const std::size_t row = (std::size_t)clampi(y + dy, 0, h - 1) * w;
                for (int dx = -R; dx <= R; ++dx) acc += img[row + clampi(x + dx, 0, w - 1)];
            }
            out[(std::size_t)y * w + x] = acc * (1.0f / 25.0f);
        }
    }
}
