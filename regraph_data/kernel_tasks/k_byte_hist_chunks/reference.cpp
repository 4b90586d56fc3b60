// Serial per-chunk byte histogram.
extern "C" void byte_hist_chunks(int chunks, int chunk_len, const unsigned char* data, int* hist) {
    for (int c = 0; c < chunks; ++c) {
        int* h = hist + static_cast<long long>(c) * 256;
        for (int v = 0; v < 256; ++v) h[v] = 0;
        const unsigned char* d = data + static_cast<long long>(c) * chunk_len;
        for (int i = 0; i < chunk_len; ++i) ++h[d[i]];
    }
}
