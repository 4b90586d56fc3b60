// All-pairs n-body with shared-memory tiles. A block owns 64 bodies (threadIdx.x); its 4 thread rows
// (threadIdx.y) split the sources: in each round every row loads its own tile of 64 sources into
// shared memory and accumulates them, so four tiles are consumed per round. The 4 partial sums of a
// body are added through shared memory at the end. Padding sources have zero mass and contribute 0.

#define BODIES 64
#define SLICES 4

extern "C" __global__ void nbody_accel_kernel(int n, float soft2, const float* __restrict__ px,
                                              const float* __restrict__ py, const float* __restrict__ pz,
                                              const float* __restrict__ mass, float* __restrict__ ax,
                                              float* __restrict__ ay, float* __restrict__ az) {
    __shared__ float4 src[SLICES][BODIES];
    __shared__ float part[3][SLICES][BODIES];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int i = blockIdx.x * BODIES + tx;
    const bool valid = i < n;
    const float xi = valid ? px[i] : 0.0f;
    const float yi = valid ? py[i] : 0.0f;
    const float zi = valid ? pz[i] : 0.0f;
    float sx = 0.0f, sy = 0.0f, sz = 0.0f;
    const int tiles = (n + BODIES - 1) / BODIES;
    for (int t0 = 0; t0 < tiles; t0 += SLICES) {
        const int j = (t0 + ty) * BODIES + tx;
        src[ty][tx] = j < n ? make_float4(px[j], py[j], pz[j], mass[j]) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
#pragma unroll 8
        for (int q = 0; q < BODIES; ++q) {
            const float4 b = src[ty][q];
            const float dx = b.x - xi;
            const float dy = b.y - yi;
            const float dz = b.z - zi;
            const float inv = rsqrtf(dx * dx + dy * dy + dz * dz + soft2);
            const float s = b.w * inv * inv * inv;
            sx += dx * s;
            sy += dy * s;
            sz += dz * s;
        }
        __syncthreads();
    }
    part[0][ty][tx] = sx;
    part[1][ty][tx] = sy;
    part[2][ty][tx] = sz;
    __syncthreads();
    if (ty == 0 && valid) {
        float rx = 0.0f, ry = 0.0f, rz = 0.0f;
#pragma unroll
        for (int k = 0; k < SLICES; ++k) {
            rx += part[0][k][tx];
            ry += part[1][k][tx];
            rz += part[2][k][tx];
        }
        ax[i] = rx;
        ay[i] = ry;
        az[i] = rz;
    }
}
