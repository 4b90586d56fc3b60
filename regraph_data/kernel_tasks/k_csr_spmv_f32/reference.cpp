// Serial CSR sparse matrix-vector product, accumulated in double.
extern "C" void csr_spmv(int rows, int cols, int nnz, const int* row_ptr, const int* col_idx, const float* vals,
                         const float* x, float* y) {
    (void)cols;
    (void)nnz;
    for (int i = 0; i < rows; ++i) {
        double s = 0.0;
        for (int e = row_ptr[i]; e < row_ptr[i + 1]; ++e) s += static_cast<double>(vals[e]) * x[col_idx[e]];
        y[i] = static_cast<float>(s);
    }
}
