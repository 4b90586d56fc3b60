#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

// One thread per segment.
__global__ void bbox_kernel(int nseg, const int* seg_start, const float* pts, float* bbox) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nseg) return;
    const int b = seg_start[s], e = seg_start[s + 1];
    float x0 = pts[2 * b], y0 = pts[2 * b + 1], x1 = x0, y1 = y0;
    for (int k = b + 1; k < e; ++k) {
        const float x = pts[2 * k], y = pts[2 * k + 1];
        x0 = fminf(x0, x); x1 = fmaxf(x1, x);
        y0 = fminf(y0, y); y1 = fmaxf(y1, y);
    }
    bbox[4 * s] = x0; bbox[4 * s + 1] = y0; bbox[4 * s + 2] = x1; bbox[4 * s + 3] = y1;
}

extern "C" void segment_bbox_f32(int nseg, int npts, const int* seg_start, const float* pts, float* bbox) {
    int* d_start = nullptr;
    float* d_pts = nullptr;
    float* d_bbox = nullptr;
    do {
        TRY(cudaMalloc(&d_start, size_t(nseg + 1) * sizeof(int)));
        TRY(cudaMalloc(&d_pts, size_t(2) * npts * sizeof(float)));
        TRY(cudaMalloc(&d_bbox, size_t(4) * nseg * sizeof(float)));
        TRY(cudaMemcpy(d_start, seg_start, size_t(nseg + 1) * sizeof(int), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_pts, pts, size_t(2) * npts * sizeof(float), cudaMemcpyHostToDevice));
        bbox_kernel<<<(nseg + 255) / 256, 256>>>(nseg, d_start, d_pts, d_bbox);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(bbox, d_bbox, size_t(4) * nseg * sizeof(float), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_start);
    cudaFree(d_pts);
    cudaFree(d_bbox);
}
