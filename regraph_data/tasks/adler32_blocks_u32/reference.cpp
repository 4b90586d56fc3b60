#include <cstddef>

// Serial reference: the textbook byte-at-a-time Adler-32 recurrence.
extern "C" void adler32_blocks_u32(int nblk, int blen, const unsigned char* data, unsigned int* sum) {
    const unsigned int MOD = 65521u;
    for (int b = 0; b < nblk; ++b) {
        const unsigned char* p = data + (std::size_t)b * blen;
        unsigned int a = 1, s = 0;
        for (int i = 0; i < blen; ++i) {
            a = (a + p[i]) % MOD;
            s = (s + a) % MOD;
        }
        sum[b] = (s << 16) | a;
    }
}
