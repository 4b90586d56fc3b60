// Serial reference: histogram, inclusive scan, equalisation table, then the per-pixel lookup.
#include <cstddef>

static int bin_of(float v) {
    int b = static_cast<int>(v * 256.0f);  // truncation toward zero; the clamp handles v < 0 and v >= 1
    return b < 0 ? 0 : (b > 255 ? 255 : b);
}

extern "C" void hist_equalize_f32(int n, const float* img, int* lut, unsigned char* out) {
    long long hist[256] = {};
    for (int i = 0; i < n; ++i) ++hist[bin_of(img[i])];
    long long cdf[256], run = 0, cdf_min = 0;
    for (int b = 0; b < 256; ++b) {
        run += hist[b];
        cdf[b] = run;
        if (cdf_min == 0 && run > 0) cdf_min = run;
    }
    long long d = static_cast<long long>(n) - cdf_min;
    for (int b = 0; b < 256; ++b) {
        long long num = cdf[b] - cdf_min;
        if (num < 0) num = 0;
        lut[b] = d > 0 ? static_cast<int>((num * 255 + d / 2) / d) : 0;
    }
    for (int i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(lut[bin_of(img[i])]);
}
