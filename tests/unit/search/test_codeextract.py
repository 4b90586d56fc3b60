"""Code extraction from model answers and the entry-point check."""

from __future__ import annotations

import pytest

from search.codeextract import defines_entry, entry_point_preserved, extract_code, is_serial_cpp
from search.errors import CodeExtractionError

SAXPY = """#include <cuda_runtime.h>
__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    cudaFree(dx); cudaFree(dy);
}
"""


def test_single_cuda_fence() -> None:
    answer = f"I coalesced the loads.\n\n```cuda\n{SAXPY}```\nThat is all."
    assert extract_code(answer, "saxpy") == SAXPY


def test_picks_the_block_that_defines_the_entry() -> None:
    usage = "saxpy(n, 2.0f, x, y);\n"
    helper = "__device__ float twice(float v) { return 2 * v; }\n"
    answer = f"```cpp\n{helper}```\nthen\n```cuda\n{SAXPY}```\nUse it as\n```cpp\n{usage}```\n"
    assert extract_code(answer, "saxpy") == SAXPY


def test_later_revision_wins() -> None:
    first = SAXPY.replace("256", "128")
    answer = f"Draft:\n```cuda\n{first}```\nFinal version:\n```\n{SAXPY}```"
    assert extract_code(answer, "saxpy") == SAXPY


def test_non_code_fences_are_ignored() -> None:
    answer = f'```json\n{{"speedup": 3}}\n```\n```cu\n{SAXPY}```'
    assert extract_code(answer, "saxpy") == SAXPY


def test_unterminated_fence_of_a_truncated_answer() -> None:
    answer = f"Here it is:\n```cuda\n{SAXPY}"
    assert extract_code(answer, "saxpy") == SAXPY


def test_no_fences_strips_prose() -> None:
    answer = f"Sure! The optimized code follows.\n{SAXPY}\nThis uses 256 threads per block"
    code = extract_code(answer, "saxpy")
    assert code.startswith("#include <cuda_runtime.h>")
    assert code.rstrip().endswith("}")
    assert "Sure!" not in code and "threads per block" not in code


def test_no_code_at_all() -> None:
    with pytest.raises(CodeExtractionError):
        extract_code("I cannot help with that.", "saxpy")


@pytest.mark.parametrize(
    "code",
    [
        SAXPY,
        SAXPY.replace('extern "C" void saxpy', 'extern "C" __host__ void saxpy'),
        'extern "C" {\n' + SAXPY.split('extern "C" ')[1] + "}\n",
        'extern "C" void saxpy(int n, float a, const float* x, float* y);\n'
        + SAXPY.replace('extern "C" ', ""),
    ],
    ids=["prefix", "host-qualifier", "block", "prior-declaration"],
)
def test_entry_point_preserved_function(code: str) -> None:
    assert entry_point_preserved(code, "saxpy")


@pytest.mark.parametrize(
    "code",
    [
        SAXPY.replace('extern "C" ', ""),  # C++ linkage: the executor cannot find it by name
        SAXPY.replace("void saxpy(", "void saxpy_v2("),  # renamed
        SAXPY.replace("{\n    float *dx", ";\nvoid unused() {\n    float *dx"),  # declared, never defined
        '// extern "C" void saxpy(int n) {}\n' + SAXPY.replace('extern "C" ', ""),  # only in a comment
    ],
    ids=["cxx-linkage", "renamed", "declaration-only", "commented-out"],
)
def test_entry_point_lost_function(code: str) -> None:
    assert not entry_point_preserved(code, "saxpy")


def test_kernel_entry_point() -> None:
    assert entry_point_preserved(SAXPY, "saxpy_kernel", "kernel")
    bounded = SAXPY.replace(
        "__global__ void saxpy_kernel", "__global__ void __launch_bounds__(256) saxpy_kernel"
    )
    assert entry_point_preserved(bounded, "saxpy_kernel", "kernel")
    assert not entry_point_preserved(SAXPY.replace("__global__", "__device__"), "saxpy_kernel", "kernel")
    assert defines_entry(SAXPY, "saxpy_kernel", "kernel")
    assert not entry_point_preserved(SAXPY, "saxpy", "kernel")


SERIAL = 'extern "C" void scale(int n, float* x) {\n    for (int i = 0; i < n; ++i) x[i] *= 2.0f;\n}\n'


@pytest.mark.parametrize(
    "code",
    [
        SERIAL,
        "// a serial version; the cuda one comes later\n" + SERIAL,
        "/* no __global__ here */\n" + SERIAL,
        SERIAL.replace("scale", "barracuda_scale"),
        '#include <cstdio>\nint main() { std::printf("cuda"); }\n',
    ],
)
def test_serial_cpp_is_recognised_whatever_its_comments_and_names_say(code: str) -> None:
    assert is_serial_cpp(code)


@pytest.mark.parametrize(
    "code",
    [
        SAXPY,
        "__global__ void k(float* x) { x[0] = 1; }\n",
        "__device__ float twice(float v) { return 2 * v; }\n",
        "void f() { k<<<1, 1>>>(); }\n",
        "void f(float* d) { cudaMemset(d, 0, 4); }\n",
        "#include <cuda_runtime.h>\nint main() {}\n",
        '#include "cooperative_groups.h"\nint main() {}\n',
        "void f(int* i) { *i = threadIdx.x; }\n",
    ],
)
def test_any_cuda_construct_makes_a_program_cuda(code: str) -> None:
    assert not is_serial_cpp(code)
