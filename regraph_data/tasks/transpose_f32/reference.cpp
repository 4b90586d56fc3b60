// Serial reference: out[c][r] = in[r][c].
#include <cstddef>

extern "C" void transpose_f32(int rows, int cols, const float* in, float* out) {
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            out[static_cast<std::size_t>(c) * rows + r] = in[static_cast<std::size_t>(r) * cols + c];
}
