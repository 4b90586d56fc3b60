// Serial reference: byte-by-byte case mapping.
extern "C" void to_upper_ascii_u8(long long n, const unsigned char* text, unsigned char* out) {
    for (long long i = 0; i < n; ++i) {
        const unsigned char c = text[i];
        out[i] = (c >= 'a' && c <= 'z') ? (unsigned char)(c - 32) : c;
    }
}
