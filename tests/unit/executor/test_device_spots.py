"""The bookkeeping of a kernel's spot samples (``executor.worker.gpu.DeviceSpots``): which launch each
kept sample is, where its values sit in the device buffer, and which positions of the output they are.

There is no GPU here, so the four driver calls it makes (allocate, free, an asynchronous copy on the
device, a copy to the host) go to ``HostDriver`` below: a stand-in for pycuda's, on one host byte array,
with addresses as offsets into it. The real driver runs in
``tests/gpu/test_adversarial_corpus.py::test_kernel_launches_skimmed_between_the_checked_ones_fail_a_spot_check``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from executor.taskformat import parse_task
from executor.worker.gpu import SPOT_RUNS, DeviceSpots, spot_positions
from executor.worker.host import SPOT_CALLS, SPOT_ELEMENTS
from executor.worker.runtime import CandidateFailed


class HostDriver:
    """pycuda.driver's calls that DeviceSpots makes, on host memory (BASE: addresses never 0)."""

    BASE = 1 << 20

    class Error(Exception):
        pass

    class MemoryError(Error):
        pass

    class Allocation:
        def __init__(self, driver: HostDriver, at: int) -> None:
            self.driver, self.at = driver, at

        def __int__(self) -> int:
            return self.at

        def free(self) -> None:
            self.driver.freed.append(self.at)

    def __init__(self, nbytes: int) -> None:
        self.memory = np.zeros(nbytes, np.uint8)
        self.next = 0
        self.freed: list[int] = []

    def mem_alloc(self, nbytes: int) -> Allocation:
        if self.next + nbytes > self.memory.size:
            raise HostDriver.MemoryError("out of memory")
        at, self.next = self.BASE + self.next, self.next + nbytes
        return HostDriver.Allocation(self, at)

    def view(self, at: Any, nbytes: int) -> np.ndarray:
        start = int(at) - self.BASE
        assert start >= 0 and start + nbytes <= self.next, (start, nbytes)
        return self.memory[start : start + nbytes]

    def memcpy_dtod_async(self, dst: Any, src: Any, nbytes: int, stream: Any) -> None:
        self.view(dst, nbytes)[:] = self.view(src, nbytes)

    def memcpy_dtoh(self, host: np.ndarray, src: Any) -> None:
        host.reshape(-1).view(np.uint8)[:] = self.view(src, host.nbytes)


class HostGpu:
    def __init__(self, nbytes: int) -> None:
        self.cuda = HostDriver(nbytes)


C_TYPES = {"float32": "float", "int32": "int", "int64": "long long"}


def _task(outputs: list[tuple[str, str, str]], sorted_output: str | None = None) -> Any:
    """A kernel task ``spots(int n, const float* x, <outputs>)``; ``sorted_output`` compared sorted."""
    args: list[dict[str, Any]] = [
        {"name": "n", "kind": "scalar", "dtype": "int32", "value": "n"},
        {
            "name": "x",
            "kind": "array",
            "dtype": "float32",
            "size": "n",
            "intent": "in",
            "generator": {"dist": "uniform", "low": 0.0, "high": 1.0},
        },
    ]
    for name, dtype, size in outputs:
        arg: dict[str, Any] = {"name": name, "kind": "array", "dtype": dtype, "size": size, "intent": "out"}
        if name == sorted_output:
            arg["compare"] = {"mode": "sorted"}
        args.append(arg)
    params = ", ".join(["int n", "const float* x"] + [f"{C_TYPES[d]}* {name}" for name, d, _ in outputs])
    return parse_task(
        {
            "format": "regraph.task/v1",
            "kind": "kernel",
            "id": "spots",
            "domain": "elementwise",
            "description": "spot samples",
            "entry": "spots_kernel",
            "signature": f"void spots({params})",
            "params": {"n": {"test": 100, "timing": 20000}},
            "args": args,
            "kernel": {
                "signature": f"__global__ void spots_kernel({params})",
                "block": ["256", "1", "1"],
                "grid": ["(n + 255) / 256", "1", "1"],
                "shared_bytes": "0",
            },
        }
    )


def test_the_runs_are_consecutive_elements_inside_the_output() -> None:
    rng = np.random.default_rng(5)
    run = SPOT_ELEMENTS // SPOT_RUNS
    for size in (SPOT_ELEMENTS + 1, 20000, 1 << 22):
        positions = spot_positions(size, rng)
        assert positions is not None and positions.size == SPOT_ELEMENTS
        assert positions.min() >= 0 and positions.max() < size
        runs = positions.reshape(SPOT_RUNS, run)
        assert (np.diff(runs, axis=1) == 1).all()
    assert spot_positions(SPOT_ELEMENTS, rng) is None and spot_positions(7, rng) is None


def test_every_kept_sample_holds_its_launch_values_at_its_positions() -> None:
    task = _task([("y", "float32", "n"), ("small", "int64", "10")])
    shapes: dict[str, np.ndarray] = {"y": np.zeros(20000, np.float32), "small": np.zeros(10, np.int64)}
    gpu = HostGpu(64 << 20)
    spots = DeviceSpots(gpu, task, shapes)  # type: ignore[arg-type]
    # Two rotated slots' output buffers; launch i leaves values that name it in them.
    slots = [{name: gpu.cuda.mem_alloc(a.nbytes) for name, a in shapes.items()} for _ in range(2)]
    launches = SPOT_CALLS + 144
    for i in range(launches):
        j = i % 2
        y = np.arange(20000, dtype=np.float32) + np.float32(100000 * (i % 97))
        small = np.arange(10, dtype=np.int64) * 1000 + i
        gpu.cuda.view(slots[j]["y"], y.nbytes)[:] = y.view(np.uint8)
        gpu.cuda.view(slots[j]["small"], small.nbytes)[:] = small.view(np.uint8)
        spots.after_launch(slots[j], j, f"timed launch {i + 1}", stream=None)
    kept = spots.collect()
    assert len(kept) == SPOT_CALLS and spots.calls.offered == launches
    numbers = {int(call.split()[-1]) - 1 for _, call, _ in kept}
    assert len(numbers) == SPOT_CALLS and max(numbers) >= SPOT_CALLS  # later launches replaced some
    for source, call, sample in kept:
        i = int(call.split()[-1]) - 1
        assert source == i % 2
        y = np.arange(20000, dtype=np.float32) + np.float32(100000 * (i % 97))
        positions = sample["y"].positions
        assert positions is not None and np.array_equal(sample["y"].values, y[positions])
        assert sample["small"].positions is None
        assert np.array_equal(sample["small"].values, np.arange(10, dtype=np.int64) * 1000 + i)
    buffers = list(spots.buffers.values())
    spots.free()
    assert [int(b) for b in buffers] == gpu.cuda.freed


def test_a_larger_sorted_output_is_not_sampled_and_no_buffer_is_too_big() -> None:
    task = _task([("y", "float32", "n"), ("order", "int32", "n")], sorted_output="order")
    shapes = {"y": np.zeros(20000, np.float32), "order": np.zeros(20000, np.int32)}
    spots = DeviceSpots(HostGpu(64 << 20), task, shapes)  # type: ignore[arg-type]
    assert list(spots.outputs) == ["y"]
    with pytest.raises(CandidateFailed, match="spot-check buffers do not fit"):
        DeviceSpots(HostGpu(1 << 20), task, shapes)  # type: ignore[arg-type]


def test_a_gather_copies_the_same_runs_in_one_call_per_output() -> None:
    """Option ``kernel_spot_gather``: the runs of a launch's sample go through one call (here a stand-in
    with the semantics of ``executor.devcompare``'s ``regraph_spot_gather``: run r from byte offset
    ``starts[r]`` of the source to ``dst + r * run``), and the kept samples are the launch's values at
    their positions, as with a copy per run. The real kernel runs in tests/gpu/test_devcompare_gpu.py."""
    task = _task([("y", "float32", "n"), ("small", "int64", "10")])
    shapes: dict[str, np.ndarray] = {"y": np.zeros(20000, np.float32), "small": np.zeros(10, np.int64)}
    gpu = HostGpu(64 << 20)
    calls: list[int] = []
    copies = [0]
    plain_copy = gpu.cuda.memcpy_dtod_async

    def counted_copy(dst: Any, src: Any, nbytes: int, stream: Any) -> None:
        copies[0] += 1
        plain_copy(dst, src, nbytes, stream)

    gpu.cuda.memcpy_dtod_async = counted_copy  # type: ignore[method-assign]

    def gather(dst: int, src: int, starts: list[int], run: int, stream: Any) -> None:
        calls.append(len(starts))
        for r, start in enumerate(starts):
            gpu.cuda.view(dst + r * run, run)[:] = gpu.cuda.view(src + start, run)

    spots = DeviceSpots(gpu, task, shapes, gather)  # type: ignore[arg-type]
    slots = [{name: gpu.cuda.mem_alloc(a.nbytes) for name, a in shapes.items()} for _ in range(2)]
    for i in range(40):
        j = i % 2
        y = np.arange(20000, dtype=np.float32) * np.float32(1 + i)
        gpu.cuda.view(slots[j]["y"], y.nbytes)[:] = y.view(np.uint8)
        gpu.cuda.view(slots[j]["small"], 80)[:] = (np.arange(10, dtype=np.int64) + i).view(np.uint8)
        spots.after_launch(slots[j], j, f"timed launch {i + 1}", stream=None)
    assert calls == [SPOT_RUNS] * 40  # one gather per launch for the large output
    assert copies[0] == 40  # and one plain copy for the small one, copied whole
    kept = spots.collect()
    assert len(kept) == 40
    for _, call, sample in kept:
        i = int(call.split()[-1]) - 1
        positions = sample["y"].positions
        assert positions is not None and positions.size == SPOT_ELEMENTS
        y = np.arange(20000, dtype=np.float32) * np.float32(1 + i)
        assert np.array_equal(sample["y"].values, y[positions])
        assert np.array_equal(sample["small"].values, np.arange(10, dtype=np.int64) + i)
