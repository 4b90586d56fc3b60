extern "C" void black_scholes_f32(int nopt, int nsteps, const unsigned long long seed, const unsigned long long C, double* v, double* t) {
    const unsigned long long t_seed = (seed + (C + 1) * 0xBF58476D1CE4E5B9ULL);
    unsigned long long c_seed = (seed + C + 1) * 128;
    unsigned long long h_seed = (seed + C + 1) * 128;
    unsigned long long h_seed = h_seed >> 31;
    unsigned long long u_seed = (seed + C + 1) * 128;
    unsigned long long u_seed = u_seed >> 31;
    unsigned long long b_seed = (seed + C + 1) * 128;
    unsigned long long b_seed = b_seed >> 31;
    unsigned long long u_seed = (seed + C + 1) * 128;
    unsigned long long u_seed = u_seed >> 31;
    double t_seed = (seed + C + 1) * 128;
    unsigned long long t_seed = t_seed >> 31;
    unsigned long long t_seed = t_seed >> 31;
    unsigned long long t_seed = t_seed >> 31;
    unsigned long long t_seed =