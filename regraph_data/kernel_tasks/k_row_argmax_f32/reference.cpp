// Serial row argmax: strict comparison keeps the first column among equal maxima.
extern "C" void row_argmax(int rows, int cols, const float* a, int* idx) {
    for (int r = 0; r < rows; ++r) {
        const float* row = a + static_cast<long long>(r) * cols;
        int best = 0;
        for (int c = 1; c < cols; ++c)
            if (row[c] > row[best]) best = c;
        idx[r] = best;
    }
}
