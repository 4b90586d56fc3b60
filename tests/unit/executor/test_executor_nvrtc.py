"""Kernel-task compiles through NVRTC (libnvrtc from the nvidia-cuda-nvrtc wheel; no GPU needed).

NVRTC must give what the nvcc build gives: a CUBIN for the arch, the ptxas resource report, compile
errors as results with the log, the same content-hash cache, and a fallback to nvcc for sources that
need what NVRTC lacks (host headers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.compile import MINIMAL, Compiler, parse_ptxas_report
from executor.errors import ToolchainError
from executor.nvrtc import candidate_libraries, find_nvrtc
from executor.taskformat import FunctionTask, KernelTask

if find_nvrtc() is None:
    pytest.skip("libnvrtc not found (install the nvcc extra)", allow_module_level=True)

SCALE = """#include <cstdint>
#include <cuda_runtime.h>
#include <cfloat>
__device__ double twice(double v) { return 2.0 * v; }
int64_t unused_helper(int64_t v) { return v + 1; }
__global__ void scale_kernel(long long count, double s, const double* in, double* out) {
    __shared__ double tile[256];
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < count ? in[i] : DBL_MAX;
    __syncthreads();
    if (i < count) out[i] = s * tile[threadIdx.x] + twice(0.0);
}
"""


@pytest.fixture
def nvrtc_compiler(tmp_path: Path) -> Compiler:
    return Compiler(tmp_path, arch="sm_90", choice="nvrtc")


def test_nvrtc_builds_a_cubin_with_a_resource_report(
    nvrtc_compiler: Compiler, scale_kernel: FunctionTask | KernelTask
) -> None:
    result = nvrtc_compiler.compile(scale_kernel, SCALE)
    assert result.ok, result.log
    assert result.compiler == "nvrtc" and result.fallback is None and not result.cache_hit
    assert result.product is not None
    assert Path(result.product).read_bytes()[:4] == b"\x7fELF"  # a CUBIN, not PTX
    (kernel,) = result.kernels
    assert kernel.name == "_Z12scale_kernelxdPKdPd"
    assert kernel.registers is not None and kernel.registers > 0
    assert kernel.shared_bytes == 256 * 8
    assert kernel.barriers == 1
    assert result.arch == "sm_90"


def test_nvrtc_and_nvcc_report_the_same_kernel(
    tmp_path: Path, nvrtc_compiler: Compiler, scale_kernel: FunctionTask | KernelTask
) -> None:
    from_nvrtc = nvrtc_compiler.compile(scale_kernel, SCALE)
    from_nvcc = Compiler(tmp_path / "nvcc", arch="sm_90", choice="nvcc").compile(scale_kernel, SCALE)
    assert from_nvcc.ok and from_nvcc.compiler == "nvcc"
    assert [k.name for k in from_nvrtc.kernels] == [k.name for k in from_nvcc.kernels]
    assert from_nvrtc.kernels[0].shared_bytes == from_nvcc.kernels[0].shared_bytes


def test_a_compile_error_is_a_result_with_the_log(
    nvrtc_compiler: Compiler, scale_kernel: FunctionTask | KernelTask
) -> None:
    result = nvrtc_compiler.compile(scale_kernel, SCALE.replace("twice(0.0)", "thrice(0.0)"))
    assert not result.ok and result.product is None
    assert result.compiler == "nvrtc"
    assert 'identifier "thrice" is undefined' in result.log
    again = nvrtc_compiler.compile(scale_kernel, SCALE.replace("twice(0.0)", "thrice(0.0)"))
    assert again.cache_hit and not again.ok


def test_the_cache_answers_a_repeated_source(
    nvrtc_compiler: Compiler, scale_kernel: FunctionTask | KernelTask
) -> None:
    first = nvrtc_compiler.compile(scale_kernel, SCALE)
    second = nvrtc_compiler.compile(scale_kernel, SCALE)
    assert not first.cache_hit and second.cache_hit
    assert second.product == first.product and second.kernels == first.kernels
    other = nvrtc_compiler.compile(scale_kernel, SCALE + "\n// another candidate\n")
    assert not other.cache_hit and other.product != first.product


def test_auto_falls_back_to_nvcc_for_a_header_nvrtc_lacks(
    tmp_path: Path, scale_kernel: FunctionTask | KernelTask
) -> None:
    compiler = Compiler(tmp_path, arch="sm_90", choice="auto")
    plain = compiler.compile(scale_kernel, SCALE)
    assert plain.ok and plain.compiler == "nvrtc"
    needs_host_headers = (
        "#include <vector>\nstatic int host_only() { std::vector<int> v(3); return (int)v.size(); }\n" + SCALE
    )
    result = compiler.compile(scale_kernel, needs_host_headers)
    assert result.ok, result.log
    assert result.compiler == "nvcc"
    assert result.fallback is not None and '"vector"' in result.fallback
    assert [k.name for k in result.kernels] == ["_Z12scale_kernelxdPKdPd"]


def test_nvrtc_only_reports_what_nvrtc_rejects(
    tmp_path: Path, scale_kernel: FunctionTask | KernelTask
) -> None:
    compiler = Compiler(tmp_path, arch="sm_90", choice="nvrtc")
    result = compiler.compile(scale_kernel, "#include <vector>\n" + SCALE)
    assert not result.ok and result.compiler == "nvrtc" and result.fallback is None
    assert 'cannot open source file "vector"' in result.log


def test_function_tasks_keep_nvcc(tmp_path: Path, saxpy: FunctionTask | KernelTask) -> None:
    assert saxpy.naive_source is not None
    result = Compiler(tmp_path, arch="sm_90", choice="auto").compile(saxpy, saxpy.naive_source)
    assert result.ok and result.compiler == "nvcc" and result.kind == "shared_library"


def test_a_missing_library_is_a_toolchain_error_only_when_nvrtc_is_required(
    tmp_path: Path, scale_kernel: FunctionTask | KernelTask
) -> None:
    missing = str(tmp_path / "no-such-libnvrtc.so")
    with pytest.raises(ToolchainError, match="no libnvrtc"):
        Compiler(tmp_path, choice="nvrtc", nvrtc_path=missing).compile(scale_kernel, SCALE)
    result = Compiler(tmp_path, choice="auto", nvrtc_path=missing).compile(scale_kernel, SCALE)
    assert result.ok and result.compiler == "nvcc" and result.fallback is None


def test_library_search_order_starts_with_the_setting(tmp_path: Path) -> None:
    explicit = tmp_path / "libnvrtc.so.13"
    assert candidate_libraries(str(explicit)) == [explicit]
    (tmp_path / "libnvrtc.so.13").write_bytes(b"")
    (tmp_path / "libnvrtc-builtins.so.13.2").write_bytes(b"")
    assert candidate_libraries(str(tmp_path)) == [explicit]


def test_resource_report_parsing_of_an_nvrtc_log() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]\n"
        "ptxas info    : Compile time = 2.1 ms\n"
    )
    (kernel,) = parse_ptxas_report(log)
    assert (kernel.name, kernel.registers, kernel.shared_bytes, kernel.constant_bytes) == ("k", 40, 4096, 380)
    assert (kernel.stack_bytes, kernel.spill_store_bytes, kernel.spill_load_bytes) == (16, 8, 4)


def test_the_builtin_headers_compile_under_nvrtc(
    nvrtc_compiler: Compiler, scale_kernel: FunctionTask | KernelTask
) -> None:
    from executor.nvrtc import BUILTIN_HEADERS

    includes = "".join(f"#include <{name}>\n" for name in BUILTIN_HEADERS)
    uses = (
        "__device__ double limits_used() { return FLT_MAX + DBL_EPSILON + INT_MAX + UINT_MAX + LLONG_MIN"
        " + ULLONG_MAX + CHAR_BIT + (int64_t)1 + (uint8_t)1 + (size_t)1 + INFINITY; }\n"
    )
    result = nvrtc_compiler.compile(scale_kernel, includes + uses + SCALE)
    assert result.ok and result.compiler == "nvrtc", result.log


NOINLINE = """
__device__ __noinline__ float helper(float v) { return v * 3.0f; }
__global__ void first_kernel(int n, float* out) { int i = threadIdx.x; if (i < n) out[i] = helper(i); }
extern "C" __global__ void second_kernel(int n, float* out) { int i = threadIdx.x; if (i < n) out[i] = 1.0f; }
"""


@pytest.mark.parametrize("choice", ["nvrtc", "nvcc"])
def test_kernel_names_are_read_from_the_cubin_itself(
    tmp_path: Path, scale_kernel: FunctionTask | KernelTask, choice: str
) -> None:
    """Without a resource report (CUDA 13.0's NVRTC prints none) the kernels still come from the ELF."""
    from executor.compile import kernels_of
    from executor.cubin import CubinFormatError, kernel_names

    result = Compiler(tmp_path, arch="sm_90", choice=choice).compile(scale_kernel, NOINLINE)  # type: ignore[arg-type]
    assert result.ok, result.log
    assert result.product is not None
    cubin = Path(result.product).read_bytes()
    names = kernel_names(cubin)
    assert names == sorted(names, key=names.index)  # section order, no duplicates
    assert set(names) == {"_Z12first_kerneliPf", "second_kernel"}  # the __noinline__ helper is no kernel
    from_elf = kernels_of("", cubin)
    assert [k.name for k in from_elf] == names and all(k.registers is None for k in from_elf)
    assert [k.name for k in result.kernels] == names or {k.name for k in result.kernels} == set(names)
    with pytest.raises(CubinFormatError):
        kernel_names(b"// PTX, not a CUBIN" + bytes(64))
    with pytest.raises(CubinFormatError):
        kernel_names(cubin[:80])


TEXTURE_KERNEL = """
__global__ void scale_kernel(long long count, double s, const double* in, double* out) {
    cudaTextureObject_t unused = 0;  // a type that NVRTC's --minimal leaves out
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < count) out[i] = s * in[i] + (double)(unused & 0);
}
"""


def test_nvrtc_compiles_minimal_first_and_again_in_full_when_that_fails(
    nvrtc_compiler: Compiler, scale_kernel: FunctionTask | KernelTask
) -> None:
    nvrtc = nvrtc_compiler.nvrtc
    assert nvrtc is not None
    if not nvrtc.has_minimal:
        pytest.skip(f"NVRTC {nvrtc.release} has no --minimal")
    plain = nvrtc_compiler.compile(scale_kernel, SCALE)
    assert plain.ok and MINIMAL in plain.command
    # The texture type is unknown under --minimal (checked here), so the full compile is what built it.
    assert not nvrtc.compile(TEXTURE_KERNEL, [*nvrtc_compiler.nvrtc_options(nvrtc), MINIMAL]).ok
    texture = nvrtc_compiler.compile(scale_kernel, TEXTURE_KERNEL)
    assert texture.ok, texture.log
    assert texture.compiler == "nvrtc" and MINIMAL not in texture.command and texture.fallback is None
