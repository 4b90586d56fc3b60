// Serial reference: accumulate each entry into its row.
extern "C" void coo_row_sums_f64(int nrows, int nnz, const int* row, const double* val, double* out) {
    for (int r = 0; r < nrows; ++r) out[r] = 0.0;
    for (int e = 0; e < nnz; ++e) out[row[e]] += val[e];
}
