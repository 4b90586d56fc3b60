// Serial 5 x 5 box blur with clamp-to-edge borders. For each output row the five clamped source rows
// are summed per column first, then a horizontal window of five column sums gives each pixel.
#include <vector>

extern "C" void box_blur5(int height, int width, const unsigned char* img, unsigned char* out) {
    std::vector<int> colsum(width);
    auto clamp = [](int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); };
    for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) colsum[x] = 0;
        for (int dy = -2; dy <= 2; ++dy) {
            const unsigned char* row = img + static_cast<long long>(clamp(y + dy, height - 1)) * width;
            for (int x = 0; x < width; ++x) colsum[x] += row[x];
        }
        unsigned char* o = out + static_cast<long long>(y) * width;
        for (int x = 0; x < width; ++x) {
            int s = 0;
            for (int dx = -2; dx <= 2; ++dx) s += colsum[clamp(x + dx, width - 1)];
            o[x] = static_cast<unsigned char>((s + 12) / 25);
        }
    }
}
