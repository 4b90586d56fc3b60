// Serial reference: scan each segment's points once.
extern "C" void segment_bbox_f32(int nseg, int npts, const int* seg_start, const float* pts, float* bbox) {
    (void)npts;
    for (int s = 0; s < nseg; ++s) {
        float x0 = pts[2 * seg_start[s]], y0 = pts[2 * seg_start[s] + 1], x1 = x0, y1 = y0;
        for (int k = seg_start[s] + 1; k < seg_start[s + 1]; ++k) {
            const float x = pts[2 * k], y = pts[2 * k + 1];
            x0 = x < x0 ? x : x0; x1 = x > x1 ? x : x1;
            y0 = y < y0 ? y : y0; y1 = y > y1 ? y : y1;
        }
        bbox[4 * s] = x0; bbox[4 * s + 1] = y0; bbox[4 * s + 2] = x1; bbox[4 * s + 3] = y1;
    }
}
