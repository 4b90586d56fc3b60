"""``DeviceComparer.reusing`` and ``check_each``: after a kernel's trials, the last launch on every rotated
copy is checked (two copies per timing set), and each set's reference outputs are uploaded once, not once
per copy, one set's at a time (the device memory of one check, as before the reuse).

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
            self.driver.used -= self.bytes.nbytes

    def __init__(self, capacity: int = 1 << 30) -> None:
        self.capacity, self.used, self.live = capacity, 0, 0
        self.uploads = 0
        self.peak = 0  # the most bytes allocated at once

    def mem_alloc(self, nbytes: int) -> HostDriver.Allocation:
        if self.used + nbytes > self.capacity:
            raise HostDriver.MemoryError("out of memory")
        self.used += nbytes
        self.peak = max(self.peak, self.used)
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
    assert driver.live == live + 1  # the block's own copy is freed; the scratch buffer stays the comparer's
    # Outside the block: one upload per check, as before.
    counts = [comparer.failures(RULE, "float32", buf, 5000, refs[k]) for k, buf in outputs]
    assert counts == [0, 0, 1, 0] and driver.uploads == 6


def _slots(
    driver: HostDriver, sets: int, elements: int
) -> tuple[list[np.ndarray], list[tuple[int, str, Any]]]:
    """``sets`` timing sets' references and two rotated copies per set, in slot order (slot j holds set
    j % sets), as ``Worker.check_timed_calls`` gets them; the last slot's copy wrong in one element."""
    rng = np.random.default_rng(sets)
    refs = [rng.standard_normal(elements).astype(np.float32) for _ in range(sets)]
    checks = []
    for j in range(2 * sets):
        got = refs[j % sets].copy()
        if j == 2 * sets - 1:
            got[7] += 1.0
        checks.append((j % sets, f"timed launch {j}", _on_device(driver, got)))
    return refs, checks


@pytest.mark.parametrize("sets", [2, 8])
def test_the_checks_need_the_device_memory_of_one_check_and_upload_each_set_once(sets: int) -> None:
    """The review's case: 1-MB references, 2 and 8 sets. One block over the copies in slot order kept
    every set's reference at once (3.0 and 9.0 MB at the peak against 1.0 MB)."""
    elements = 1 << 18  # 1 MiB of float32
    old, new = HostDriver(), HostDriver()
    # Before the reuse (57d0025): every check uploads its reference to the scratch buffer.
    old_comparer = DeviceComparer(old, "compare.cubin")
    refs, checks = _slots(old, sets, elements)
    old.peak = old.used
    old_counts = [old_comparer.failures(RULE, "float32", buf, elements, refs[k]) for k, _, buf in checks]
    comparer = DeviceComparer(new, "compare.cubin")
    refs, checks = _slots(new, sets, elements)
    # the scratch buffer made before the trials, as a check of the correctness stage at the timing size
    # makes it
    assert comparer.failures(RULE, "float32", checks[0][2], elements, refs[0]) == 0
    new.peak, new.uploads = new.used, 0
    seen: dict[str, int | None] = {}

    def check(source: int, call: str, buf: Any) -> None:
        seen[call] = comparer.failures(RULE, "float32", buf, elements, refs[source])

    comparer.check_each(checks, check)
    assert new.peak == old.peak == old.used  # one scratch buffer, allocated once
    assert new.uploads == sets and old.uploads == 2 * sets
    # every copy checked, the wrong one found
    assert [seen[call] for _, call, _ in checks] == old_counts == [0] * (2 * sets - 1) + [1]


def test_a_task_with_two_outputs_keeps_one_sets_references_on_the_device() -> None:
    """Two outputs per copy: the scratch buffer holds one, a copy of its own the other, freed before
    the next set's; each reference is uploaded once."""
    elements = 1 << 16
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs_a, checks = _slots(driver, 4, elements)
    refs_b = [r[::-1].copy() for r in refs_a]
    both = [(k, call, (buf, _on_device(driver, refs_b[k]))) for k, call, buf in checks]
    driver.peak = driver.used
    seen: dict[str, list[int | None]] = {}

    def check(source: int, call: str, bufs: Any) -> None:
        seen[call] = [
            comparer.failures(RULE, "float32", buf, elements, ref)
            for buf, ref in zip(bufs, (refs_a[source], refs_b[source]), strict=True)
        ]

    comparer.check_each(both, check)
    assert driver.peak == driver.used + 4 * elements  # the scratch buffer and one more reference
    assert driver.uploads == 2 * 4
    assert [seen[call] for _, call, _ in both] == [[0, 0]] * 7 + [[1, 0]]


def test_the_first_failure_ends_the_checks_and_frees_the_copies() -> None:
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, checks = _slots(driver, 2, 5000)
    live = driver.live
    done: list[str] = []

    def check(source: int, call: str, buf: Any) -> None:
        done.append(call)
        if call == "timed launch 1":
            raise RuntimeError("a failure named by the check")
        comparer.failures(RULE, "float32", buf, 5000, refs[source])

    with pytest.raises(RuntimeError, match="named by the check"):
        comparer.check_each(checks, check)
    assert done == ["timed launch 0", "timed launch 2", "timed launch 1"]  # set by set
    assert driver.live == live + 1  # the scratch buffer alone
    with comparer.reusing():  # the block closed: another may open
        pass


def test_reusing_blocks_do_not_nest() -> None:
    """A block inside another would end by forgetting the outer block's copies, which would then never
    be freed: it is refused, and the outer block still frees its own."""
    driver = HostDriver()
    comparer = DeviceComparer(driver, "compare.cubin")
    refs, outputs = _copies(driver)
    live = driver.live
    with comparer.reusing():
        comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0])  # the scratch buffer
        comparer.failures(RULE, "float32", outputs[1][1], 5000, refs[1])  # a copy of its own
        with pytest.raises(RuntimeError, match="do not nest"), comparer.reusing():
            pass
        assert comparer.failures(RULE, "float32", outputs[3][1], 5000, refs[1]) == 0
        assert driver.uploads == 2  # the outer block's copies still known
    assert driver.live == live + 1  # its own copy freed; the scratch buffer stays


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
        comparer.failures(RULE, "float32", outputs[0][1], 5000, refs[0])  # the scratch buffer
        comparer.failures(RULE, "float32", outputs[1][1], 5000, refs[1])  # a copy of its own
        raise RuntimeError("a failure named by the check")
    assert driver.live == live + 1  # the copy freed; the scratch buffer stays the comparer's
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
