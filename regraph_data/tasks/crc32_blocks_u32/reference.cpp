#include <cstddef>

// Serial reference: byte-at-a-time table-driven CRC-32 (zlib polynomial), one block after another.
extern "C" void crc32_blocks_u32(int nblk, int blen, const unsigned char* data, unsigned int* crc) {
    unsigned int table[256];
    for (unsigned int i = 0; i < 256; ++i) {
        unsigned int c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    for (int b = 0; b < nblk; ++b) {
        const unsigned char* p = data + (std::size_t)b * blen;
        unsigned int c = 0xFFFFFFFFu;
        for (int i = 0; i < blen; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
        crc[b] = c ^ 0xFFFFFFFFu;
    }
}
