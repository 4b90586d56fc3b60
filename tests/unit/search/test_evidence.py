"""Code evidence: what a step's change introduces, read from a real CUDA parse."""

from __future__ import annotations

from search.relabel.evidence import MAX_CODE_BYTES, analyze_code, code_evidence, name_code_mismatch

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


# -- branches and branch-free selects -------------------------------------------------------------------

CLAMP_BRANCHY = """
__global__ void clamp_k(const float* x, float* y, float lo, float hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v < lo) v = lo;
    else if (v > hi) v = hi;
    y[i] = v;
}
"""

CLAMP_SELECT = """
__global__ void clamp_k(const float* x, float* y, float lo, float hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    // no if (v < lo) any more: comments never count
    y[i] = fminf(fmaxf(x[i], lo), hi);
}
"""

# A per-thread merge: the ?: with post-increments in its arms and the && that guards a load are control
# flow; the rewrite reads both candidates, selects a value and advances by the predicate, and even adds
# a guarded store (`if`), so it has no fewer if-statements than before.
MERGE_BRANCHY = """
__global__ void merge_k(const int* a, int na, const int* b, int nb, int* out, int len) {
    int d = (blockIdx.x * blockDim.x + threadIdx.x) * 8, i = d < na ? d : na, j = d - i;
    for (int k = 0; k < 8 && d + k < len; ++k) {
        bool take_a = j >= nb || (i < na && a[i] <= b[j]);
        out[d + k] = take_a ? a[i++] : b[j++];
    }
}
"""

MERGE_SELECT = """
__global__ void merge_k(const int* a, int na, const int* b, int nb, int* out, int len) {
    int d = (blockIdx.x * blockDim.x + threadIdx.x) * 8, i = d < na ? d : na, j = d - i;
    for (int k = 0; k < 8; ++k) {
        int va = a[min(i, na - 1)];
        int vb = b[min(j, nb - 1)];
        bool take_a = j >= nb || (i < na && va <= vb);
        if (d + k < len) out[d + k] = take_a ? va : vb;
        i += take_a;
        j += !take_a;
    }
}
"""

STENCIL = """
__global__ void life_k(int w, int h, const unsigned char* a, unsigned char* b) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int n = 0;
    for (int o = 0; o < 9; ++o) {
        int r = y + o / 3 - 1, c = x + o % 3 - 1;
        if (o == 4) continue;
        if (r >= 0 && r < h && c >= 0 && c < w) n += a[r * w + c];
    }
    switch (n) {
        case 2: b[y * w + x] = a[y * w + x]; break;
        case 3: b[y * w + x] = 1; break;
        default: b[y * w + x] = 0;
    }
}
"""


def test_branches_turned_into_min_max_are_branch_elimination_evidence() -> None:
    evidence = code_evidence(CLAMP_BRANCHY, CLAMP_SELECT)
    assert {"branches_removed", "branches_to_selects"} <= evidence.introduced
    facts = analyze_code(CLAMP_BRANCHY), analyze_code(CLAMP_SELECT)
    assert [f.device_branches for f in facts] == [3, 1]
    assert [f.device_selects for f in facts] == [0, 2]


def test_a_branch_turned_into_a_select_inside_an_expression_is_branch_elimination_evidence() -> None:
    before, after = analyze_code(MERGE_BRANCHY), analyze_code(MERGE_SELECT)
    # The ?: with side effects, the && guarding the loads a[i] <= b[j] and the || that skips that && (3)
    # -> the guarded store (1); the ?: clamping i is a select in both.
    assert (before.device_branches, after.device_branches) == (3, 1)
    # min x 2, take_a ? va : vb, i += take_a (a bool variable), j += !take_a
    assert (before.device_selects, after.device_selects) == (1, 6)
    evidence = code_evidence(MERGE_BRANCHY, MERGE_SELECT)
    assert {"branches_removed", "branches_to_selects"} <= evidence.introduced


def test_comparisons_used_as_zero_or_one_are_selects() -> None:
    after = STENCIL.replace(
        """    switch (n) {
        case 2: b[y * w + x] = a[y * w + x]; break;
        case 3: b[y * w + x] = 1; break;
        default: b[y * w + x] = 0;
    }""",
        "    b[y * w + x] = (n == 3) | (a[y * w + x] & (n == 2));",
    )
    assert after != STENCIL
    facts = analyze_code(STENCIL), analyze_code(after)
    # three ifs (the &&s compare values, they guard no work) and the switch's three labels
    assert [f.device_branches for f in facts] == [6, 3]
    assert [f.device_selects for f in facts] == [0, 2]
    assert {"branches_removed", "branches_to_selects"} <= code_evidence(STENCIL, after).introduced


def test_a_change_that_keeps_its_branches_shows_no_branch_evidence() -> None:
    after = CLAMP_BRANCHY.replace("const float* x", "const float* __restrict__ x")
    evidence = code_evidence(CLAMP_BRANCHY, after)
    assert "restrict" in evidence.introduced
    assert not {"branches_removed", "branches_to_selects"} & evidence.introduced
    # An if turned into a ?: that still does work on a side (a load) is still a branch.
    calls = CLAMP_BRANCHY.replace("else if (v > hi) v = hi;", "else v = v > hi ? __ldg(&x[1]) : v;")
    assert calls != CLAMP_BRANCHY
    assert analyze_code(calls).device_selects == 0
    assert not {"branches_removed", "branches_to_selects"} & code_evidence(CLAMP_BRANCHY, calls).introduced
    # A select added next to the same branches (a clamp on the index) is no branch turned into a select.
    clamped = CLAMP_BRANCHY.replace("float v = x[i];", "float v = x[min(i, n - 1)];")
    assert clamped != CLAMP_BRANCHY
    assert analyze_code(clamped).device_selects == 1
    assert not {"branches_removed", "branches_to_selects"} & code_evidence(CLAMP_BRANCHY, clamped).introduced


def test_a_loop_restructured_with_the_same_branches_is_no_branch_evidence() -> None:
    # Loops over rows and columns become one flat loop over the nine offsets: a loop less and other
    # index arithmetic, every branch (centre skip, bounds test, switch) stays.
    nested = STENCIL.replace(
        """    for (int o = 0; o < 9; ++o) {
        int r = y + o / 3 - 1, c = x + o % 3 - 1;
        if (o == 4) continue;
        if (r >= 0 && r < h && c >= 0 && c < w) n += a[r * w + c];
    }""",
        """    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            int r = y + i - 1, c = x + j - 1;
            if (i * 3 + j == 4) continue;
            if (r >= 0 && r < h && c >= 0 && c < w) n += a[r * w + c];
        }
    }""",
    )
    assert nested != STENCIL
    evidence = code_evidence(nested, STENCIL)
    assert analyze_code(nested).device_loops == analyze_code(STENCIL).device_loops + 1
    assert analyze_code(nested).device_branches == analyze_code(STENCIL).device_branches
    assert not {"branches_removed", "branches_to_selects"} & evidence.introduced
    # Branches removed from host code are not device branches.
    host_before = NAIVE + "\nint pick(int a, int b) { if (a < b) return a; return b; }\n"
    host_after = NAIVE + "\nint pick(int a, int b) { return a < b ? a : b; }\n"
    assert not {"branches_removed", "branches_to_selects"} & code_evidence(host_before, host_after).introduced
