// Serial reference: B3/S23 rule, dead cells beyond the edges, double buffering between generations.
#include <cstddef>
#include <vector>

extern "C" void game_of_life_u8(int w, int h, int gens, const unsigned char* in, unsigned char* out) {
    std::size_t cells = static_cast<std::size_t>(w) * h;
    std::vector<unsigned char> a(in, in + cells), b(cells);
    for (int g = 0; g < gens; ++g) {
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                int alive = 0;
                for (int dy = -1; dy <= 1; ++dy)
                    for (int dx = -1; dx <= 1; ++dx) {
                        if (dx == 0 && dy == 0) continue;
                        int yy = y + dy, xx = x + dx;
                        if (yy >= 0 && yy < h && xx >= 0 && xx < w) alive += a[static_cast<std::size_t>(yy) * w + xx];
                    }
                unsigned char self = a[static_cast<std::size_t>(y) * w + x];
                b[static_cast<std::size_t>(y) * w + x] = (alive == 3 || (self && alive == 2)) ? 1 : 0;
            }
        a.swap(b);
    }
    for (std::size_t i = 0; i < cells; ++i) out[i] = a[i];
}
