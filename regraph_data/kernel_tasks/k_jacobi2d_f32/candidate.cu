// Each 32 x 8 block stages its tile of u with a one-cell halo in shared memory (indices clamped to the
// grid, which only ever feeds boundary cells that do not use their neighbours), then computes from it.

#define TX 32
#define TY 8

extern "C" __global__ void jacobi2d_kernel(int rows, int cols, const float* __restrict__ u, float* __restrict__ v) {
    __shared__ float tile[TY + 2][TX + 2];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int j = blockIdx.x * TX + tx;
    const int i = blockIdx.y * TY + ty;
    const int ci = min(i, rows - 1);
    const int cj = min(j, cols - 1);
    const long long row = static_cast<long long>(ci) * cols;
    tile[ty + 1][tx + 1] = u[row + cj];
    if (ty == 0) tile[0][tx + 1] = u[static_cast<long long>(max(ci - 1, 0)) * cols + cj];
    if (ty == TY - 1) tile[TY + 1][tx + 1] = u[static_cast<long long>(min(ci + 1, rows - 1)) * cols + cj];
    if (tx == 0) tile[ty + 1][0] = u[row + max(cj - 1, 0)];
    if (tx == TX - 1) tile[ty + 1][TX + 1] = u[row + min(cj + 1, cols - 1)];
    __syncthreads();
    if (i >= rows || j >= cols) return;
    const float center = tile[ty + 1][tx + 1];
    if (i == 0 || j == 0 || i == rows - 1 || j == cols - 1) {
        v[row + j] = center;
    } else {
        v[row + j] = (center + tile[ty][tx + 1] + tile[ty + 2][tx + 1] + tile[ty + 1][tx] + tile[ty + 1][tx + 2]) * 0.2f;
    }
}
