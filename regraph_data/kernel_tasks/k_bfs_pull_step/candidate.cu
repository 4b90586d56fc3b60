// Bottom-up BFS step, one thread per vertex: visited vertices are settled without touching their
// edges, the others stop at the first in-neighbour found in the frontier (the frontier flags, n bytes,
// stay resident in L2).

extern "C" __global__ void bfs_pull_step_kernel(int n, int nnz, const int* __restrict__ row_ptr,
                                                const int* __restrict__ col_idx,
                                                const unsigned char* __restrict__ frontier,
                                                const unsigned char* __restrict__ visited,
                                                unsigned char* __restrict__ next) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    unsigned char found = 0;
    if (!visited[v]) {
        const int end = row_ptr[v + 1];
        for (int e = row_ptr[v]; e < end; ++e) {
            if (__ldg(frontier + col_idx[e])) {
                found = 1;
                break;
            }
        }
    }
    next[v] = found;
}
