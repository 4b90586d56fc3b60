// Serial reference: brute-force comparison at every position with early exit.
extern "C" void pattern_count_u8(int n, int m, const unsigned char* text, const unsigned char* pat,
                                 unsigned long long* count) {
    unsigned long long c = 0;
    for (int i = 0; i + m <= n; ++i) {
        int k = 0;
        while (k < m && text[i + k] == pat[k]) ++k;
        c += k == m;
    }
    count[0] = c;
}
