// Serial inclusive prefix sum of each row.
extern "C" void row_cumsum(int rows, int cols, const int* x, int* y) {
    for (int r = 0; r < rows; ++r) {
        const int* in = x + static_cast<long long>(r) * cols;
        int* out = y + static_cast<long long>(r) * cols;
        int s = 0;
        for (int c = 0; c < cols; ++c) {
            s += in[c];
            out[c] = s;
        }
    }
}
