// Serial reference: count per column, then an exclusive running sum.
extern "C" void csr_transpose_colptr_i32(int rows, int cols, int nnz, const int* row_ptr, const int* col_idx,
                                         int* col_ptr) {
    (void)nnz;
    for (int c = 0; c <= cols; ++c) col_ptr[c] = 0;
    for (int p = 0; p < row_ptr[rows]; ++p) ++col_ptr[col_idx[p] + 1];
    for (int c = 0; c < cols; ++c) col_ptr[c + 1] += col_ptr[c];
}
