// Serial bottom-up BFS step: an unvisited vertex joins the next level as soon as one in-neighbour
// is in the frontier.
extern "C" void bfs_pull_step(int n, int nnz, const int* row_ptr, const int* col_idx, const unsigned char* frontier,
                              const unsigned char* visited, unsigned char* next) {
    (void)nnz;
    for (int v = 0; v < n; ++v) {
        unsigned char found = 0;
        if (!visited[v]) {
            for (int e = row_ptr[v]; e < row_ptr[v + 1]; ++e) {
                if (frontier[col_idx[e]]) {
                    found = 1;
                    break;
                }
            }
        }
        next[v] = found;
    }
}
