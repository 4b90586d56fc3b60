// Serial reference: crossing-number test in exact integer arithmetic.
static inline void edge(int x, int y, int xi, int yi, int xj, int yj, int& c) {
    // x < xi + (y - yi)(xj - xi)/(yj - yi), multiplied out by (yj - yi) with its sign.
    if ((yi > y) != (yj > y)) {
        const long long lhs = (long long)(x - xi) * (yj - yi);
        const long long rhs = (long long)(y - yi) * (xj - xi);
        if (yj > yi ? lhs < rhs : lhs > rhs) c ^= 1;
    }
}

extern "C" void point_in_polygon_i32(int npts, int nv, const int* px, const int* py, const int* vx, const int* vy, int* inside) {
    for (int p = 0; p < npts; ++p) {
        int c = 0;
        for (int i = 0, j = nv - 1; i < nv; j = i++) edge(px[p], py[p], vx[i], vy[i], vx[j], vy[j], c);
        inside[p] = c;
    }
}
