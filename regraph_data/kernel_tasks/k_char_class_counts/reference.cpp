// Serial per-chunk character class counts through a 256-entry class table.
namespace {
int char_class(unsigned char ch) {
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z')) return 0;
    if (ch >= '0' && ch <= '9') return 1;
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') return 2;
    return 3;
}
}  // namespace

extern "C" void char_class_counts(int chunks, int chunk_len, const unsigned char* text, int* counts) {
    unsigned char table[256];
    for (int ch = 0; ch < 256; ++ch) table[ch] = static_cast<unsigned char>(char_class(static_cast<unsigned char>(ch)));
    for (int c = 0; c < chunks; ++c) {
        int k[4] = {0, 0, 0, 0};
        const unsigned char* t = text + static_cast<long long>(c) * chunk_len;
        for (int i = 0; i < chunk_len; ++i) ++k[table[t[i]]];
        for (int q = 0; q < 4; ++q) counts[4 * c + q] = k[q];
    }
}
