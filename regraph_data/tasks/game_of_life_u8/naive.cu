// Naive CUDA port: one thread per cell per generation, bounds-checked neighbour loop in global memory.
#include <cuda_runtime.h>
#include <cstddef>

#define CUDA_TRY(call) if ((call) != cudaSuccess) break

__global__ void life_step(int w, int h, const unsigned char* a, unsigned char* b) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int alive = 0;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            if (dx == 0 && dy == 0) continue;
            int yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) alive += a[static_cast<size_t>(yy) * w + xx];
        }
    unsigned char self = a[static_cast<size_t>(y) * w + x];
    b[static_cast<size_t>(y) * w + x] = (alive == 3 || (self && alive == 2)) ? 1 : 0;
}

extern "C" void game_of_life_u8(int w, int h, int gens, const unsigned char* in, unsigned char* out) {
    unsigned char *da = nullptr, *db = nullptr;
    size_t bytes = static_cast<size_t>(w) * h;
    do {
        CUDA_TRY(cudaMalloc(&da, bytes));
        CUDA_TRY(cudaMalloc(&db, bytes));
        CUDA_TRY(cudaMemcpy(da, in, bytes, cudaMemcpyHostToDevice));
        dim3 block(32, 8);
        dim3 grid((w + 31) / 32, (h + 7) / 8);
        bool failed = false;
        for (int g = 0; g < gens; ++g) {
            life_step<<<grid, block>>>(w, h, da, db);
            if (cudaGetLastError() != cudaSuccess) { failed = true; break; }
            unsigned char* t = da; da = db; db = t;
        }
        if (failed) break;
        CUDA_TRY(cudaMemcpy(out, da, bytes, cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(da);
    cudaFree(db);
}
