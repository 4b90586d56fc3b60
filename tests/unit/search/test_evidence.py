"""Code evidence: what a step's change introduces, read from a real CUDA parse."""

from __future__ import annotations

from search.evidence import MAX_CODE_BYTES, analyze_code, code_evidence, name_code_mismatch

SERIAL = """
#include <cstddef>
extern "C" void scale(const float* x, float* y, int n) {
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
"""

NAIVE = """
#include <cuda_runtime.h>
__global__ void scale_k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
extern "C" void scale(const float* x, float* y, int n) {
    float *dx, *dy;
    cudaMalloc(&dx, n * 4); cudaMalloc(&dy, n * 4);
    cudaMemcpy(dx, x, n * 4, cudaMemcpyHostToDevice);
    scale_k<<<(n + 255) / 256, 256>>>(dx, dy, n);
    cudaMemcpy(y, dy, n * 4, cudaMemcpyDeviceToHost);
}
"""

REDUCE_SHARED = """
__global__ void sum_k(const float* x, float* out, int n) {
    __shared__ float partial[256];
    partial[threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
"""

REDUCE_SHUFFLE = """
__global__ void sum_k(const float* __restrict__ x, float* out, int n) {
    float v = x[blockIdx.x * 256 + threadIdx.x];
    // no __shared__ any more; the old code used __syncthreads()
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
"""


def test_the_first_kernel_is_parallelization_evidence() -> None:
    evidence = code_evidence(SERIAL, NAIVE)
    assert evidence.parsed
    assert {"first_kernel", "launch_added"} <= evidence.introduced


def test_a_shuffle_rewrite_introduces_shuffles_and_drops_shared_memory() -> None:
    evidence = code_evidence(REDUCE_SHARED, REDUCE_SHUFFLE)
    assert {"warp_shuffle", "restrict", "syncthreads_removed"} <= evidence.introduced
    assert {"shared_memory", "syncthreads"} <= evidence.removed
    # The comment names __shared__ and __syncthreads: comments never count.
    assert "shared_memory" not in evidence.present_after


def test_fusion_removes_a_kernel_and_a_launch() -> None:
    two = (
        NAIVE.replace(
            "scale_k<<<(n + 255) / 256, 256>>>(dx, dy, n);",
            "scale_k<<<(n + 255) / 256, 256>>>(dx, dy, n);\n    scale2_k<<<(n + 255) / 256, 256>>>(dy, dy, n);",
        )
        + "\n__global__ void scale2_k(const float* x, float* y, int n) { y[0] = x[0]; }\n"
    )
    evidence = code_evidence(two, NAIVE)
    assert {"kernel_removed", "launch_removed"} <= evidence.introduced


def test_shared_padding_and_constant_memory_are_read_from_declarations() -> None:
    after = """
    __constant__ float taps[9];
    __global__ void t(float* o) { __shared__ float tile[32][32 + 1]; o[0] = tile[0][0] * taps[0]; }
    """
    evidence = code_evidence(NAIVE, after)
    assert {"shared_memory", "shared_padding", "constant_memory"} <= evidence.introduced


def test_code_that_does_not_parse_is_reported_not_trusted() -> None:
    broken = "this is { not ] CUDA at all ;;; ) ( <<< >>> " * 20
    evidence = code_evidence(NAIVE, broken)
    assert not evidence.parsed and "does not parse" in evidence.reason
    assert evidence.introduced == frozenset()
    huge = analyze_code("int x;\n" * (MAX_CODE_BYTES // 6))
    assert not huge.parsed and "not parsed" in huge.reason
    assert not analyze_code("   ").parsed


def test_a_name_mentioning_an_intrinsic_the_code_never_calls_is_a_mismatch() -> None:
    evidence = code_evidence(REDUCE_SHARED, REDUCE_SHUFFLE)
    assert name_code_mismatch("Warp reduction with __shfl_down_sync", evidence) == []
    assert name_code_mismatch("Read-only loads with __ldg", evidence) == ["__ldg"]
    assert name_code_mismatch("float4 vector loads", evidence) == ["float4"]
    assert name_code_mismatch("Pointer hints (__restrict__)", evidence) == []
