// Each 32 x 8 block stages its tile plus a one-pixel halo in shared memory (clamped coordinates: the
// clamped values only reach border pixels, which are written as 0), then applies the 3 x 3 masks.

#define TX 32
#define TY 8
#define TW (TX + 2)
#define TH (TY + 2)

extern "C" __global__ void sobel_kernel(int height, int width, const float* __restrict__ img, float* __restrict__ mag) {
    __shared__ float tile[TH][TW];
    const int tid = threadIdx.y * TX + threadIdx.x;
    const int x0 = blockIdx.x * TX;
    const int y0 = blockIdx.y * TY;
    for (int e = tid; e < TH * TW; e += TX * TY) {
        const int r = e / TW;
        const int c = e % TW;
        const int gy = min(max(y0 + r - 1, 0), height - 1);
        const int gx = min(max(x0 + c - 1, 0), width - 1);
        tile[r][c] = img[static_cast<long long>(gy) * width + gx];
    }
    __syncthreads();
    const int x = x0 + threadIdx.x;
    const int y = y0 + threadIdx.y;
    if (x >= width || y >= height) return;
    float result = 0.0f;
    if (x > 0 && y > 0 && x < width - 1 && y < height - 1) {
        const int r = threadIdx.y + 1;
        const int c = threadIdx.x + 1;
        const float gx = (tile[r - 1][c + 1] + 2.0f * tile[r][c + 1] + tile[r + 1][c + 1]) -
                         (tile[r - 1][c - 1] + 2.0f * tile[r][c - 1] + tile[r + 1][c - 1]);
        const float gy = (tile[r + 1][c - 1] + 2.0f * tile[r + 1][c] + tile[r + 1][c + 1]) -
                         (tile[r - 1][c - 1] + 2.0f * tile[r - 1][c] + tile[r - 1][c + 1]);
        result = sqrtf(gx * gx + gy * gy);
    }
    mag[static_cast<long long>(y) * width + x] = result;
}
