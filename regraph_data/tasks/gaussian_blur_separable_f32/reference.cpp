#include <cstddef>
#include <vector>

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Serial reference: horizontal 9-tap pass into a temporary image, then the vertical pass.
extern "C" void gaussian_blur_separable_f32(int h, int w, const float* img, const float* wt, float* out) {
    const int R = 4;
    std::vector<float> tmp((size_t)h * w);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            float acc = 0.0f;
            for (int k = 0; k < 2 * R + 1; ++k) acc += wt[k] * img[(size_t)y * w + clampi(x + k - R, 0, w - 1)];
            tmp[(size_t)y * w + x] = acc;
        }
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            float acc = 0.0f;
            for (int k = 0; k < 2 * R + 1; ++k) acc += wt[k] * tmp[(size_t)clampi(y + k - R, 0, h - 1) * w + x];
            out[(size_t)y * w + x] = acc;
        }
}
