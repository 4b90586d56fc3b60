// One thread per cell (grid-stride): count the live cells among the eight neighbours, apply the rules.
extern "C" __global__ void gameOfLife(const int *input, int *output, size_t N) {
    for (size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y; i < N; i += (size_t)gridDim.y * blockDim.y) {
        for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < N; j += (size_t)gridDim.x * blockDim.x) {
            int alive = 0;
            for (int di = -1; di <= 1; ++di) {
                for (int dj = -1; dj <= 1; ++dj) {
                    const long long r = (long long)i + di, c = (long long)j + dj;
                    if ((di == 0 && dj == 0) || r < 0 || c < 0 || r >= (long long)N || c >= (long long)N) continue;
                    alive += input[r * N + c];
                }
            }
            const int self = input[i * N + j];
            output[i * N + j] = (self == 1) ? (alive == 2 || alive == 3) : (alive == 3);
        }
    }
}
