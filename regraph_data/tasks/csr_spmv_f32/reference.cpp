// Serial reference: row-by-row CSR product, accumulated in double.
extern "C" void csr_spmv_f32(int rows, int cols, int nnz, const int* row_ptr, const int* col_idx, const float* vals,
                             const float* x, float* y) {
    (void)cols; (void)nnz;
    for (int r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (int j = row_ptr[r]; j < row_ptr[r + 1]; ++j) acc += static_cast<double>(vals[j]) * x[col_idx[j]];
        y[r] = static_cast<float>(acc);
    }
}
