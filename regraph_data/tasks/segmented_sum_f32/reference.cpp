// Serial reference: each segment summed in double.
extern "C" void segmented_sum_f32(int nseg, int n, const int* seg_ptr, const float* values, float* out) {
    (void)n;
    for (int s = 0; s < nseg; ++s) {
        double acc = 0.0;
        for (int j = seg_ptr[s]; j < seg_ptr[s + 1]; ++j) acc += values[j];
        out[s] = static_cast<float>(acc);
    }
}
