// One thread per pixel (grid-stride): 8 * centre minus the eight neighbours (0 outside), clipped to [0, 255].
extern "C" __global__ void convolveKernel(const int *imageIn, int *imageOut, size_t N) {
    for (size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y; i < N; i += (size_t)gridDim.y * blockDim.y) {
        for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < N; j += (size_t)gridDim.x * blockDim.x) {
            int sum = 0;
            for (int di = -1; di <= 1; ++di) {
                for (int dj = -1; dj <= 1; ++dj) {
                    const long long r = (long long)i + di, c = (long long)j + dj;
                    if (r < 0 || c < 0 || r >= (long long)N || c >= (long long)N) continue;
                    sum += imageIn[r * N + c] * ((di == 0 && dj == 0) ? 8 : -1);
                }
            }
            imageOut[i * N + j] = sum < 0 ? 0 : (sum > 255 ? 255 : sum);
        }
    }
}
