"""``DeviceComparer.reusing``: after a kernel's trials, the last launch on every rotated copy is checked
(two copies per timing set), and each set's reference outputs are uploaded once, not once per copy.

There is no GPU here: the driver calls the comparer makes (allocate, free, upload, memset, a copy to the
host, and the comparison kernel) go to ``HostDriver`` below, a stand-in for pycuda's on host memory,
whose kernel applies the host's rule (``executor.checking.passing_elements``) to the two buffers it is
given. The real kernels run in ``tests/gpu/test_devcompare_gpu.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from executor.checking import passing_elements
from executor.devcompare import DeviceComparer
from executor.taskformat import CompareRule


class HostDriver:
    """The pycuda.driver calls of DeviceComparer, on host arrays (an allocation is a numpy byte array)."""

    class Error(Exception):
        pass

    class MemoryError(Error):
        pass

    class Allocation:
        def __init__(self, driver: HostDriver, nbytes: int) -> None:
            self.driver, self.bytes = driver, np.zeros(nbytes, np.uint8)

        def free(self) -> None:
            self.driver.live -= 1

    def __init__(self, capacity: int = 1 << 30) -> None:
        self.capacity, self.used, self.live = capacity, 0, 0
        self.uploads = 0

    def mem_alloc(self, nbytes: int) -> HostDriver.Allocation:
        if self.used + nbytes > self.capacity:
            raise HostDriver.MemoryError("out of memory")
        self.used += nbytes
        self.live += 1
        return HostDriver.Allocation(self, nbytes)

    def memcpy_htod(self, dst: HostDriver.Allocation, src: np.ndarray) -> None:
        self.uploads += 1
        dst.bytes[: src.nbytes] = src.reshape(-1).view(np.uint8)

    def memset_d32(self, dst: HostDriver.Allocation, value: int, count: int) -> None:
        dst.bytes[: 4 * count].view(np.uint32)[:] = value

    def memcpy_dtoh(self, dst: np.ndarray, src: HostDriver.Allocation) -> None:
        dst.reshape(-1).view(np.uint8)[:] = src.bytes[: dst.nbytes]

    def module_from_file(self, product: str) -> Any:
        return self

    def get_function(self, name: str) -> Any:
        if name != "regraph_tolerance_f32":  # pycuda: a LogicError (a driver Error) for a missing name
            raise HostDriver.Error(f"cuModuleGetFunction failed: named symbol not found ({name})")

        def kernel(got: Any, ref: Any, n: Any, atol: Any, rtol: Any, count: Any, **launch: Any) -> None:
            a = got.bytes[: 4 * int(n)].view(np.float32)
            b = ref.bytes[: 4 * int(n)].view(np.float32)
            bad = int((~passing_elements(a, b, "close", float(atol), float(rtol), True)).sum())
            count.bytes[:8].view(np.uint64)[0] += bad

        return kernel


def _on_device(driver: HostDriver, values: np.ndarray) -> HostDriver.Allocation:
    buf = driver.mem_alloc(values.nbytes)
    buf.bytes[:] = values.view(np.uint8)
    return buf


RULE = CompareRule(atol=1e-5, rtol=1e-5)


def _copies(driver: HostDriver) -> tuple[list[np.ndarray], list[tuple[int, HostDriver.Allocation]]]:
    """Two timing sets' references and four rotated copies' outputs (slot j holds set j % 2), the
    third copy wrong in one element."""
    rng = np.random.default_rng(3)
    refs = [rng.standard_normal(5000).astype(np.float32) for _ in range(2)]
    outputs = []
    for j in range(4):
        got = refs[j % 2].copy()
        if j == 2:
            got[1234] += 1.0
        outputs.append((j % 2, _on_device(driver, got)))
    return refs, outputs


def test_each_reference_is_uploaded_once_per_block_and_every_copy_is_still_judged() -> None:
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, outputs = _copies(driver)
    live = driver.live
    with comparer.reusing():
        counts = [comparer.failures(RULE, "float32", buf, 5000, refs[k]) for k, buf in outputs]
        assert driver.uploads == 2
    assert counts == [0, 0, 1, 0]
    assert driver.live == live  # the block's own copies are freed
    # Outside the block: one upload per check, as before.
    counts = [comparer.failures(RULE, "float32", buf, 5000, refs[k]) for k, buf in outputs]
    assert counts == [0, 0, 1, 0] and driver.uploads == 6


def test_an_equal_array_that_is_another_object_is_uploaded_again() -> None:
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, outputs = _copies(driver)
    with comparer.reusing():
        assert comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0]) == 0
        # a copy of set 0's reference with the element that copy 2 got wrong fixed to its value
        other = refs[0].copy()
        other[1234] += 1.0
        assert comparer.failures(RULE, "float32", outputs[2][1], 5000, other) == 0
        assert comparer.failures(RULE, "float32", outputs[2][1], 5000, refs[0]) == 1
    assert driver.uploads == 2


def test_without_memory_for_copies_of_their_own_the_scratch_buffer_is_used() -> None:
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, outputs = _copies(driver)
    assert comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0]) == 0  # makes the scratch
    driver.capacity, driver.uploads = driver.used + 10000, 0  # no room for a reference of 20,000 bytes
    with comparer.reusing():
        counts = [comparer.failures(RULE, "float32", buf, 5000, refs[k]) for k, buf in outputs]
    assert counts == [0, 0, 1, 0] and driver.uploads == 4


def test_the_copies_are_freed_when_a_check_in_the_block_fails() -> None:
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, outputs = _copies(driver)
    live = driver.live
    with pytest.raises(RuntimeError), comparer.reusing():
        comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0])
        raise RuntimeError("a failure named by the check")
    assert driver.live == live
    before = driver.uploads
    assert comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0]) == 0
    assert driver.uploads == before + 1  # outside a block again: uploaded


def test_a_free_that_fails_after_a_fault_does_not_hide_the_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, outputs = _copies(driver)

    def broken_free(self: HostDriver.Allocation) -> None:
        raise HostDriver.Error("an illegal address was encountered")

    with pytest.raises(RuntimeError, match="the check's own failure"), comparer.reusing():
        comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0])
        monkeypatch.setattr(HostDriver.Allocation, "free", broken_free)
        raise RuntimeError("the check's own failure")


def test_without_the_gather_kernel_the_spot_samples_are_copied_run_by_run() -> None:
    """A comparison module without ``regraph_spot_gather`` (built from an older source): no gather,
    so option ``kernel_spot_gather`` falls back to the copies instead of failing the candidate."""
    comparer = DeviceComparer(HostDriver(), "compare.cubin")
    assert comparer.spot_gather() is None
    with pytest.raises(RuntimeError, match="not readied"):
        comparer.gather(0, 0, [0] * 8, 16, None)
