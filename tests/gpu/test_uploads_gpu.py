"""A worker's device uploads are made a chunk at a time, each under its own hold of the lock given,
and arrive whole (executor.worker.gpu.GpuContext.upload). Needs an NVIDIA GPU and pycuda."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import time
from collections.abc import Iterator

import numpy as np
import pytest

from executor.inputs import InputSet
from executor.worker.host import COPY_CHUNK_BYTES

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)


def test_an_upload_is_made_a_chunk_at_a_time_under_the_lock_and_arrives_whole() -> None:
    from executor.worker.gpu import GpuContext

    gpu = GpuContext()
    try:
        rng = np.random.default_rng(7)
        # 2.5 chunks of float32 values, a tiny array and an empty one
        big = rng.standard_normal((5 * COPY_CHUNK_BYTES) // 8, dtype=np.float32)
        small = np.arange(3, dtype=np.int64)
        inputs = InputSet(1, "timing", {}, {"big": big, "small": small, "none": np.empty(0, np.float64)})
        holds: list[bool] = []
        copying = [False]

        @contextlib.contextmanager
        def lock() -> Iterator[None]:
            holds.append(copying[0])  # no hold is taken while another is still held
            copying[0] = True
            yield
            copying[0] = False

        buffers = gpu.upload(inputs, lock=lock)
        assert len(holds) == 3 + 1 and not any(holds)
        for name, array in inputs.arrays.items():
            back = np.empty_like(array)
            if array.size:
                gpu.cuda.memcpy_dtoh(back, buffers[name])
            assert np.array_equal(back, array), name
        copies = gpu.copy(buffers, inputs, lock)
        assert len(holds) == 5
        back = np.empty_like(big)
        gpu.cuda.memcpy_dtoh(back, copies["big"])
        assert np.array_equal(back, big)
        for buf in [*buffers.values(), *copies.values()]:
            buf.free()
    finally:
        gpu.close()


def test_a_context_is_made_under_the_lock_and_says_how_long_each_part_took() -> None:
    """Only the context's creation holds the lock it is given (the driver is loaded before it); the
    context exists once the lock is let go."""
    from executor.worker.gpu import GpuContext

    entered: list[float] = []

    @contextlib.contextmanager
    def lock() -> Iterator[None]:
        entered.append(time.perf_counter())
        yield

    began = time.perf_counter()
    gpu = GpuContext(lock)
    try:
        assert len(entered) == 1
        assert set(gpu.seconds) == {"context_init", "context_lock_wait", "context_create"}
        assert gpu.seconds["context_init"] <= entered[0] - began
        buf = gpu.cuda.mem_alloc(16)  # the context is current
        buf.free()
    finally:
        gpu.close()
