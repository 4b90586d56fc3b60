// Serial Sobel gradient magnitude; the one-pixel border is set to zero.
#include <cmath>

extern "C" void sobel(int height, int width, const float* img, float* mag) {
    for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
            const long long c = static_cast<long long>(y) * width + x;
            if (y == 0 || x == 0 || y == height - 1 || x == width - 1) {
                mag[c] = 0.0f;
                continue;
            }
            auto p = [&](int dy, int dx) { return img[c + static_cast<long long>(dy) * width + dx]; };
            const float gx = (p(-1, 1) + 2.0f * p(0, 1) + p(1, 1)) - (p(-1, -1) + 2.0f * p(0, -1) + p(1, -1));
            const float gy = (p(1, -1) + 2.0f * p(1, 0) + p(1, 1)) - (p(-1, -1) + 2.0f * p(-1, 0) + p(-1, 1));
            mag[c] = std::sqrt(gx * gx + gy * gy);
        }
    }
}
