// Serial reference: walk each row's slots, skipping padding, accumulate in double.
extern "C" void ell_spmv_f32(int rows, int cols, int K, const int* ell_col, const float* ell_val, const float* x,
                             float* y) {
    (void)cols;
    for (int r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (int k = 0; k < K; ++k) {
            long long slot = static_cast<long long>(k) * rows + r;
            int c = ell_col[slot];
            if (c >= 0) acc += static_cast<double>(ell_val[slot]) * x[c];
        }
        y[r] = static_cast<float>(acc);
    }
}
