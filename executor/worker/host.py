"""The host runtime: function-task ``.so`` files called through ctypes on host pointers.

:class:`FunctionRuntime` is the call and its host-clock timing, shared with the GPU function runtime
(:mod:`executor.worker.gpu`), which adds an L2 flush and a device synchronisation. The plain
:class:`HostFunctionRuntime` involves no CUDA at all: it exists to exercise the isolation and checking
machinery on machines without a GPU, and never passes a candidate in the service unless enabled.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

from executor.abi import bind_entry, call_entry
from executor.checking import measure, timing_stats
from executor.inputs import InputSet
from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import TimingStats
from executor.worker.runtime import Runtime


class HostSlots:
    """Rotated host copies of the timing sources (function tasks), made before the candidate arrives.

    Distinct copies per rotation slot, so that no trial finds its inputs in the CPU caches.
    """

    def __init__(self, sources: list[InputSet], rotate: int) -> None:
        self.sources = sources
        self.rotated = [sources[j % len(sources)].copy() for j in range(rotate)]


class FunctionRuntime(Runtime):
    """A function-task .so called on host pointers; the GPU and host variants differ in two hooks."""

    def __init__(self, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        self.task = task
        self.fn = bind_entry(ctypes.CDLL(product), symbol, task)

    def before_trial(self) -> None:
        """Untimed preparation of the device before a timed call."""

    def after_call(self) -> None:
        """Wait for the call's work to finish (part of the timed region)."""

    def run(
        self, inputs: InputSet, uploaded: dict[str, Any] | None = None, call: str = "a call"
    ) -> dict[str, np.ndarray]:
        work = inputs.copy()
        with self.watch.call(call):
            call_entry(self.fn, self.task, work.scalars, work.arrays)
            self.after_call()
        return {a.name: work.arrays[a.name] for a in self.task.outputs}

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        assert isinstance(slots, HostSlots)
        sources, rotated = slots.sources, slots.rotated
        outputs = [a.name for a in self.task.outputs]
        last: dict[str, Any] = {}
        # The slowest wall time of the calls so far (the flush included): a call's limit is derived
        # from it when it is below the limit's own time per call.
        slowest_ms = [0.0]  # 0: none yet

        def trial(i: int) -> float:
            j = i % len(rotated)
            work, source = rotated[j], sources[j % len(sources)]
            for name in outputs:  # restore inout and re-poison out (untimed)
                np.copyto(work.arrays[name], source.arrays[name])
            # Announced before the L2 flush (which evicts whatever the announcement touched) and
            # after the clock is read: neither is in the timed region.
            what = f"warm-up call {-i}" if i < 0 else f"timed call {i + 1}"
            with self.watch.call(what, 1, slowest_ms[0] or None):
                began = time.perf_counter()
                self.before_trial()
                start = time.perf_counter()
                call_entry(self.fn, self.task, work.scalars, work.arrays)
                self.after_call()
                end = time.perf_counter()
            elapsed = (end - start) * 1e3
            slowest_ms[0] = max(slowest_ms[0], (end - began) * 1e3)
            last.update(set=j % len(sources), outputs={name: work.arrays[name] for name in outputs})
            return elapsed

        # One call at a time: each is timed on the host clock around the call and its synchronisation.
        samples, stop = measure(trial, options.trial_policy())
        return timing_stats(samples, stop), last


class HostFunctionRuntime(FunctionRuntime):
    """A function-task .so called on host memory (no GPU)."""
