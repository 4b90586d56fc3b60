// Serial reference: running sum in a 64-bit accumulator.
extern "C" void inclusive_scan_i32(int n, const int* x, long long* y) {
    long long run = 0;
    for (int i = 0; i < n; ++i) {
        run += x[i];
        y[i] = run;
    }
}
