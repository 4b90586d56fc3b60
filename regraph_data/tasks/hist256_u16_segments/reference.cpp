// Serial reference: one pass per segment over both halves of every word.
#include <cstddef>

extern "C" void hist256_u16_segments(int nseg, int seg_words, const unsigned int* data, int* hist) {
    for (int s = 0; s < nseg; ++s) {
        int* h = hist + static_cast<std::size_t>(s) * 256;
        for (int b = 0; b < 256; ++b) h[b] = 0;
        const unsigned int* w = data + static_cast<std::size_t>(s) * seg_words;
        for (int i = 0; i < seg_words; ++i) {
            ++h[(w[i] >> 8) & 0xFF];   // low sample
            ++h[w[i] >> 24];           // high sample
        }
    }
}
