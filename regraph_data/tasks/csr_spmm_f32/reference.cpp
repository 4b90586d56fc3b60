// Serial reference: row by row, accumulate vals[p] * B[col_idx[p], :] into a double row buffer.
#include <cstddef>
#include <vector>

extern "C" void csr_spmm_f32(int rows, int cols, int ncols, int nnz, const int* row_ptr, const int* col_idx,
                             const float* vals, const float* B, float* C) {
    (void)cols; (void)nnz;
    std::vector<double> acc(ncols);
    for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < ncols; ++j) acc[j] = 0.0;
        for (int p = row_ptr[r]; p < row_ptr[r + 1]; ++p) {
            double v = vals[p];
            const float* brow = B + static_cast<std::size_t>(col_idx[p]) * ncols;
            for (int j = 0; j < ncols; ++j) acc[j] += v * brow[j];
        }
        for (int j = 0; j < ncols; ++j) C[static_cast<std::size_t>(r) * ncols + j] = static_cast<float>(acc[j]);
    }
}
