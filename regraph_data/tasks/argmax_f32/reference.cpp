// Serial reference: first index holding the maximum.
extern "C" void argmax_f32(int n, const float* x, int* idx) {
    int best = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    idx[0] = best;
}
