// Serial reference: one pass, one counter increment per byte.
extern "C" void byte_histogram_u8(long long n, const unsigned char* data, unsigned int* hist) {
    for (int b = 0; b < 256; ++b) hist[b] = 0;
    for (long long i = 0; i < n; ++i) ++hist[data[i]];
}
