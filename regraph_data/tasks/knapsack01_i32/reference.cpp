// Serial reference: the one-row DP, capacities scanned downwards so each item is used at most once.
extern "C" void knapsack01_i32(int nitems, int cap, const int* wt, const int* val, int* best) {
    for (int c = 0; c <= cap; ++c) best[c] = 0;
    for (int i = 0; i < nitems; ++i)
        for (int c = cap; c >= wt[i]; --c) {
            const int take = best[c - wt[i]] + val[i];
            if (take > best[c]) best[c] = take;
        }
}
