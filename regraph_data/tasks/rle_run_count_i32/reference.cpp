#include <cstddef>

// Serial reference: count value changes segment by segment.
extern "C" void rle_run_count_i32(int nseg, int seglen, const unsigned char* data, int* runs) {
    for (int s = 0; s < nseg; ++s) {
        const unsigned char* p = data + (std::size_t)s * seglen;
        int count = seglen > 0 ? 1 : 0;
        for (int i = 1; i < seglen; ++i) count += p[i] != p[i - 1];
        runs[s] = count;
    }
}
