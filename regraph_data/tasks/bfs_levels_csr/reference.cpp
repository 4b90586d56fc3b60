// Serial reference: queue-based BFS from vertex 0.
#include <vector>

extern "C" void bfs_levels_csr(int n, int m, const int* row_ptr, const int* col_idx, int* level) {
    (void)m;
    for (int v = 0; v < n; ++v) level[v] = -1;
    std::vector<int> queue;
    queue.reserve(n);
    level[0] = 0;
    queue.push_back(0);
    for (std::size_t head = 0; head < queue.size(); ++head) {
        int u = queue[head];
        for (int j = row_ptr[u]; j < row_ptr[u + 1]; ++j) {
            int v = col_idx[j];
            if (level[v] < 0) {
                level[v] = level[u] + 1;
                queue.push_back(v);
            }
        }
    }
}
