#include <cuda_runtime.h>

// Any CUDA failure abandons the call; the buffers are released after the loop in every case.
#define TRY(call) if ((call) != cudaSuccess) break

constexpr int MAXSTEPS = 1024;
constexpr double R = 0.05, SIGMA = 0.3;

// One thread per option; tree values in an option-major global scratch array.
__global__ void tree_kernel(int nopt, int nsteps, const double* S, const double* K, const double* T, double* v, double* price) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= nopt) return;
    double* w = v + (size_t)o * (nsteps + 1);
    const double dt = T[o] / nsteps, sd = SIGMA * sqrt(dt);
    const double u = exp(sd), d = 1.0 / u;
    const double p = (exp(R * dt) - d) / (u - d), disc = exp(-R * dt);
    for (int j = 0; j <= nsteps; ++j) w[j] = fmax(S[o] * exp(sd * (2 * j - nsteps)) - K[o], 0.0);
    for (int i = nsteps - 1; i >= 0; --i)
        for (int j = 0; j <= i; ++j) w[j] = disc * (p * w[j + 1] + (1.0 - p) * w[j]);
    price[o] = w[0];
}

extern "C" void binomial_call_f64(int nopt, int nsteps, const double* S, const double* K, const double* T, double* price) {
    double* d_S = nullptr;
    double* d_K = nullptr;
    double* d_T = nullptr;
    double* d_price = nullptr;
    double* d_v = nullptr;  // scratch tree values (unused by the shared-memory version)
    do {
        if (nsteps < 1 || nsteps > MAXSTEPS) break;
        TRY(cudaMalloc(&d_S, size_t(nopt) * sizeof(double)));
        TRY(cudaMalloc(&d_K, size_t(nopt) * sizeof(double)));
        TRY(cudaMalloc(&d_T, size_t(nopt) * sizeof(double)));
        TRY(cudaMalloc(&d_price, size_t(nopt) * sizeof(double)));
        TRY(cudaMemcpy(d_S, S, size_t(nopt) * sizeof(double), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_K, K, size_t(nopt) * sizeof(double), cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(d_T, T, size_t(nopt) * sizeof(double), cudaMemcpyHostToDevice));
        TRY(cudaMalloc(&d_v, size_t(nopt) * (nsteps + 1) * sizeof(double)));
        tree_kernel<<<(nopt + 127) / 128, 128>>>(nopt, nsteps, d_S, d_K, d_T, d_v, d_price);
        TRY(cudaGetLastError());
        TRY(cudaMemcpy(price, d_price, size_t(nopt) * sizeof(double), cudaMemcpyDeviceToHost));
    } while (0);
    cudaFree(d_S);
    cudaFree(d_K);
    cudaFree(d_T);
    cudaFree(d_price);
    cudaFree(d_v);
}
