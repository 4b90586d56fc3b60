// Serial transpose.
extern "C" void transpose(int rows, int cols, const float* in, float* out) {
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            out[static_cast<long long>(c) * rows + r] = in[static_cast<long long>(r) * cols + c];
}
