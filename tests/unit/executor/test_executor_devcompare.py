"""The device comparison's host side: which kernel judges which output, and that the kernels build.

Whether the kernels count exactly the elements that the host rule rejects is checked on a GPU
(tests/gpu/test_executor_gpu.py::test_device_comparison_counts_what_the_host_rejects).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.compile import Compiler
from executor.cubin import kernel_names
from executor.devcompare import compare_source, kernel_name
from executor.nvrtc import find_nvrtc
from executor.taskformat import DType

KERNELS = {
    "regraph_tolerance_f32",
    "regraph_tolerance_f64",
    "regraph_exact_f32",
    "regraph_exact_f64",
    "regraph_exact_b1",
    "regraph_exact_b4",
    "regraph_exact_b8",
    "regraph_spot_gather",  # not a comparison: the spot samples' copy (option kernel_spot_gather)
}


@pytest.mark.parametrize(
    ("dtype", "mode", "expected"),
    [
        ("float32", "tolerance", "regraph_tolerance_f32"),
        ("float64", "tolerance", "regraph_tolerance_f64"),
        ("float32", "exact", "regraph_exact_f32"),
        ("float64", "exact", "regraph_exact_f64"),
        ("int8", "tolerance", "regraph_exact_b1"),  # integers are always compared for equality
        ("uint8", "exact", "regraph_exact_b1"),
        ("int32", "tolerance", "regraph_exact_b4"),
        ("uint32", "exact", "regraph_exact_b4"),
        ("int64", "tolerance", "regraph_exact_b8"),
        ("uint64", "tolerance", "regraph_exact_b8"),
        ("float32", "sorted", None),  # decided on the host
        ("int32", "sorted", None),
    ],
)
def test_each_output_rule_has_its_kernel(dtype: DType, mode: str, expected: str | None) -> None:
    assert kernel_name(dtype, mode) == expected


def test_every_named_kernel_is_in_the_source() -> None:
    source = compare_source()
    for name in KERNELS:
        assert f"({name}," in source or f"__global__ void {name}(" in source
    # Each operation of the tolerance test is rounded on its own, as numpy computes it.
    assert "__dadd_rn(__dmul_rn(fabs(y), rtol), atol)" in source and "__dsub_rn(x, y)" in source


@pytest.mark.skipif(find_nvrtc() is None, reason="libnvrtc not found (install the nvcc extra)")
def test_the_comparison_kernels_build_to_a_cubin(tmp_path: Path) -> None:
    result = Compiler(tmp_path, arch="sm_90", choice="nvrtc").compile_source(compare_source(), "cubin")
    assert result.ok, result.log
    assert result.product is not None
    assert set(kernel_names(Path(result.product).read_bytes())) == KERNELS
    assert all(k.spill_store_bytes in (0, None) for k in result.kernels)
