// Serial reference: the classic two-finger merge, taking from a on ties.
extern "C" void merge_sorted_i32(int na, int nb, const int* a, const int* b, int* out) {
    int i = 0, j = 0, k = 0;
    while (i < na && j < nb) out[k++] = (a[i] <= b[j]) ? a[i++] : b[j++];
    while (i < na) out[k++] = a[i++];
    while (j < nb) out[k++] = b[j++];
}
