"""The device comparison counts exactly the elements that the host rule rejects.

Every dtype and rule, on outputs built to sit on the edges of the rule: NaN and infinities on either
side, signed zeros, subnormals, differences exactly at ``atol + rtol*|ref|`` and one ulp either side
of it, integer extremes and the poison values. Needs an NVIDIA GPU, pycuda and NVRTC or nvcc.
"""

from __future__ import annotations

import importlib.util
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from executor.checking import passing_elements
from executor.compile import Compiler, device_arch
from executor.devcompare import DeviceComparer, compare_source
from executor.inputs import INT_POISON
from executor.taskformat import CompareRule, DType, is_float

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

RULES = [
    CompareRule(mode="tolerance", atol=1e-5, rtol=1e-4),
    CompareRule(mode="tolerance", atol=0.0, rtol=0.0),
    CompareRule(mode="tolerance", atol=0.5, rtol=0.0),
    CompareRule(mode="exact"),
]
DTYPES: list[DType] = ["float32", "float64", "int8", "uint8", "int32", "uint32", "int64", "uint64"]


def _host_failures(got: np.ndarray, ref: np.ndarray, rule: CompareRule, dtype: DType) -> int:
    """The host's count of failing elements (executor.checking's rule)."""
    return int(
        (~passing_elements(got, ref, rule.mode, rule.atol or 0.0, rule.rtol or 0.0, is_float(dtype))).sum()
    )


def _edge_outputs(dtype: DType, rule: CompareRule, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = 200_003  # not a multiple of the block size
    if not is_float(dtype):
        info = np.iinfo(dtype)
        ref = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
        got = ref.copy()
        flip = rng.random(n) < 0.3
        got[flip] = rng.integers(info.min, info.max, size=int(flip.sum()), dtype=dtype, endpoint=True)
        got[:4] = [info.min, info.max, INT_POISON[dtype], 0]
        ref[:4] = [info.min, info.min, INT_POISON[dtype], 1]
        return got, ref
    ftype = np.dtype(dtype).type
    ref = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, size=n)).astype(dtype)
    limit = (rule.atol or 0.0) + (rule.rtol or 0.0) * np.abs(ref.astype(np.float64))
    # Differences at the limit, a little inside and outside it, then rounded to the dtype.
    scale = rng.choice([0.0, 0.5, 0.999999, 1.0, 1.000001, 2.0], size=n)
    got = (ref.astype(np.float64) + rng.choice([-1.0, 1.0], size=n) * scale * limit).astype(dtype)
    # One ulp either side of the reference, and exactly the reference.
    some = rng.random(n) < 0.1
    got[some] = np.nextafter(ref[some], rng.choice([-np.inf, np.inf], size=int(some.sum())).astype(dtype))
    got[:200] = ref[:200]
    tiny = np.finfo(dtype).smallest_subnormal
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, np.finfo(dtype).max, 1.0]
    k = len(specials)
    for i, (a, b) in enumerate((a, b) for a in specials for b in specials):
        got[i], ref[i] = ftype(a), ftype(b)
    assert k * k < 200
    return got, ref


@pytest.fixture(scope="module")
def comparer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeviceComparer]:
    import pycuda.driver as cuda

    arch = device_arch() or "sm_90"
    built = Compiler(tmp_path_factory.mktemp("devcompare"), arch=arch).compile_source(
        compare_source(), "cubin"
    )
    assert built.ok and built.product, built.log
    cuda.init()
    context = cuda.Device(0).retain_primary_context()
    context.push()
    made = DeviceComparer(cuda, built.product)
    yield made
    made.free()
    context.pop()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.mode}-{r.atol}-{r.rtol}")
def test_device_comparison_counts_what_the_host_rejects(
    comparer: DeviceComparer, dtype: DType, rule: CompareRule
) -> None:
    cuda: Any = comparer.cuda
    rng = np.random.default_rng(zlib.crc32(repr((dtype, rule)).encode()))
    with np.errstate(over="ignore", invalid="ignore"):
        got, ref = _edge_outputs(dtype, rule, rng)
    host = _host_failures(got, ref, rule, dtype)
    assert 0 < host < got.size  # the data exercise both outcomes
    buffer = cuda.mem_alloc(got.nbytes)
    try:
        cuda.memcpy_htod(buffer, got)
        assert comparer.failures(rule, dtype, buffer, got.size, ref) == host
        # Against itself only NaN fails, and under a tolerance infinities too (inf - inf is NaN).
        itself = _host_failures(got, got, rule, dtype)
        nonfinite = np.isnan(got) if rule.mode == "exact" else ~np.isfinite(got)
        assert itself == (int(nonfinite.sum()) if is_float(dtype) else 0)
        assert comparer.failures(rule, dtype, buffer, got.size, got) == itself
    finally:
        buffer.free()


def test_what_the_device_does_not_decide_goes_to_the_host(comparer: DeviceComparer) -> None:
    cuda: Any = comparer.cuda
    values = np.arange(1000, dtype=np.float32)
    buffer = cuda.mem_alloc(values.nbytes)
    try:
        cuda.memcpy_htod(buffer, values)
        assert comparer.failures(CompareRule(mode="sorted"), "float32", buffer, values.size, values) is None
        assert comparer.failures(CompareRule(), "float32", buffer, values.size, values[:10]) is None
        assert (
            comparer.failures(CompareRule(), "float32", buffer, values.size, values.astype(np.float64))
            is None
        )
        assert comparer.failures(CompareRule(), "float32", buffer, values.size, values) == 0
    finally:
        buffer.free()


def test_the_comparison_cubin_is_compiled_once(tmp_path: Path) -> None:
    compiler = Compiler(tmp_path, arch=device_arch() or "sm_90")
    first = compiler.compile_source(compare_source(), "cubin")
    again = compiler.compile_source(compare_source(), "cubin")
    assert first.ok and again.cache_hit and again.product == first.product


def test_without_device_memory_for_the_reference_the_host_decides(comparer: DeviceComparer) -> None:
    """A candidate that leaves no device memory for the reference's outputs is not blamed for it:
    the device gives no answer, and the worker compares on the host instead."""
    cuda: Any = comparer.cuda
    values = np.zeros(32 << 20, dtype=np.float32)  # 128 MiB, more than any earlier scratch buffer
    got = cuda.mem_alloc(values.nbytes)
    cuda.memcpy_htod(got, values)
    hog: list[Any] = []
    try:
        for chunk in (1 << 30, 64 << 20):  # take the device's free memory, big pieces first
            while True:
                try:
                    hog.append(cuda.mem_alloc(chunk))
                except cuda.MemoryError:
                    break
        assert comparer.failures(CompareRule(), "float32", got, values.size, values) is None
    finally:
        for buf in hog:
            buf.free()
    try:
        assert comparer.failures(CompareRule(), "float32", got, values.size, values) == 0
    finally:
        got.free()


def test_the_spot_gather_copies_each_run_from_its_byte_offset(comparer: DeviceComparer) -> None:
    """``regraph_spot_gather`` (option ``kernel_spot_gather``): run r of ``run`` bytes from byte offset
    ``starts[r]`` of the source lands at ``dst + r * run``, as the 8 copies it replaces put it."""
    from executor.devcompare import GATHER_RUNS

    cuda: Any = comparer.cuda
    values = np.arange(1 << 20, dtype=np.float32)
    src, dst = cuda.mem_alloc(values.nbytes), cuda.mem_alloc(GATHER_RUNS * 2048)
    try:
        cuda.memcpy_htod(src, values)
        rng = np.random.default_rng(7)
        for item, run in ((4, 2048), (4, 4), (8, 2048)):
            starts = [
                int(s) * item for s in rng.integers(0, values.nbytes // item - run // item, GATHER_RUNS)
            ]
            stream = cuda.Stream()
            gather = comparer.spot_gather()
            assert gather is not None
            gather(int(dst), int(src), starts, run, stream)
            stream.synchronize()
            got = np.empty(GATHER_RUNS * run, np.uint8)
            cuda.memcpy_dtoh(got, dst)
            raw = values.view(np.uint8)
            want = np.concatenate([raw[s : s + run] for s in starts])
            assert np.array_equal(got, want), (item, run)
    finally:
        src.free()
        dst.free()


def test_checks_inside_reusing_judge_every_copy(comparer: DeviceComparer) -> None:
    """Two sets' references, four copies' outputs (the third wrong in one element), checked inside
    ``reusing()`` as after a kernel's trials: each copy judged against its own set."""
    cuda: Any = comparer.cuda
    rng = np.random.default_rng(9)
    refs = [rng.standard_normal(300_001).astype(np.float32) for _ in range(2)]
    bufs = []
    try:
        for j in range(4):
            got = refs[j % 2].copy()
            if j == 2:
                got[12345] += 1.0
            bufs.append(cuda.mem_alloc(got.nbytes))
            cuda.memcpy_htod(bufs[-1], got)
        rule = CompareRule(atol=1e-6, rtol=1e-6)
        with comparer.reusing():
            counts = [
                comparer.failures(rule, "float32", b, refs[0].size, refs[j % 2]) for j, b in enumerate(bufs)
            ]
        assert counts == [0, 0, 1, 0]
    finally:
        for b in bufs:
            b.free()
