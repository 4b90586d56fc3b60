#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

__device__ __forceinline__ void edge(int x, int y, int xi, int yi, int xj, int yj, int& c) {
    // x < xi + (y - yi)(xj - xi)/(yj - yi), multiplied out by (yj - yi) with its sign.
    if ((yi > y) != (yj > y)) {
        const long long lhs = (long long)(x - xi) * (yj - yi);
        const long long rhs = (long long)(y - yi) * (xj - xi);
        if (yj > yi ? lhs < rhs : lhs > rhs) c ^= 1;
    }
}

// One thread per point, walking all polygon edges in global memory.
__global__ void pip_kernel(int npts, int nv, const int* px, const int* py, const int* vx, const int* vy, int* inside) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npts) return;
    const int x = px[p], y = py[p];
    int c = 0;
    for (int i = 0, j = nv - 1; i < nv; j = i++) edge(x, y, vx[i], vy[i], vx[j], vy[j], c);
    inside[p] = c;
}

extern "C" void point_in_polygon_i32(int npts, int nv, const int* px, const int* py, const int* vx, const int* vy, int* inside) {
    int* d_px = nullptr;
    int* d_py = nullptr;
    int* d_vx = nullptr;
    int* d_vy = nullptr;
    int* d_inside = nullptr;
    do {
        TRY(cudaMalloc(&d_px, size_t(npts) * sizeof(int)));
        TRY(cudaMalloc(&d_py, size_t(npts) * sizeof(int)));
        TRY(cudaMalloc(&d_vx, size_t(nv) * sizeof(int)));
        TRY(cudaMalloc(&d_vy, size_t(nv) * sizeof(int)));
        TRY(cudaMalloc(&d_inside, size_t(npts) * sizeof(int)));
        TRY(cudaMemcpy(d_px, px, size_t(npts) * sizeof(int), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_py, py, size_t(npts) * sizeof(int), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_vx, vx, size_t(nv) * sizeof(int), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_vy, vy, size_t(nv) * sizeof(int), cudaMemcpyHostToDevice));
        pip_kernel<<<(npts + 255) / 256, 256>>>(npts, nv, d_px, d_py, d_vx, d_vy, d_inside);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(inside, d_inside, size_t(npts) * sizeof(int), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_px);
    cudaFree(d_py);
    cudaFree(d_vx);
    cudaFree(d_vy);
    cudaFree(d_inside);
}
