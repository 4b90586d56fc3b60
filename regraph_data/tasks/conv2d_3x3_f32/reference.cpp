// Serial reference: 3x3 cross-correlation with zero padding.
extern "C" void conv2d_3x3_f32(int h, int w, const float* img, const float* filt, float* out) {
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            float acc = 0.0f;
            for (int i = 0; i < 3; ++i) {
                const int yy = y + i - 1;
                if (yy < 0 || yy >= h) continue;
                for (int j = 0; j < 3; ++j) {
                    const int xx = x + j - 1;
                    if (xx < 0 || xx >= w) continue;
                    acc += filt[i * 3 + j] * img[(long long)yy * w + xx];
                }
            }
            out[(long long)y * w + x] = acc;
        }
    }
}
