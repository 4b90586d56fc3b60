"""The reference worker: the task's own serial code on the evaluation's input sets.

It writes the expected outputs of every planned set as ``.npy`` files, makes the task's timing sets
with their outputs when they are not stored yet (in its own directory, for the executor to adopt into
the store, which the worker only reads: :mod:`executor.timingset`) and times the reference when asked.
Its failures are the task's, never a candidate's.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import Any

import numpy as np

from executor import timingset
from executor.abi import bind_entry, call_entry
from executor.checking import timing_stats
from executor.inputs import InputSet, generate_inputs
from executor.reference import check_reference_outputs
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import TimingStats
from executor.worker.messages import ReferenceJob, ReferenceOutcome, expected_path, input_plan, write_progress


class ReferenceWorker:
    """Runs a :class:`ReferenceJob`: the reference is the task's code, never the candidate's."""

    def __init__(self, job: ReferenceJob) -> None:
        self.job = job
        self.task = job.task
        self.lib = ctypes.CDLL(job.reference_library)
        self.fn = bind_entry(self.lib, self.task.reference_symbol, self.task)
        self.seconds: dict[str, float] = {}

    def call(self, inputs: InputSet) -> dict[str, np.ndarray]:
        """The reference's (checked) outputs on a copy of ``inputs``."""
        work = inputs.copy()
        call_entry(self.fn, self.task, work.scalars, work.arrays)
        outputs = {a.name: work.arrays[a.name] for a in self.task.outputs}
        check_reference_outputs(self.task, outputs)
        return outputs

    def run(self) -> ReferenceOutcome:
        """Write the expected outputs of every planned set, then time the reference if asked."""
        t0 = time.perf_counter()
        out_dir = Path(self.job.out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        plan = input_plan(self.job.options, self.job.seeds)
        if self.job.sets is not None:
            plan = plan[: self.job.sets]
        timing_inputs: InputSet | None = None
        write_progress(self.job.progress_path, "reference")
        for index, (seed, size) in enumerate(plan):
            inputs = generate_inputs(self.task, size, seed, self.lib)
            for name, array in self.call(inputs).items():
                np.save(expected_path(out_dir, index, name), array, allow_pickle=False)
            if size == "timing" and timing_inputs is None:
                timing_inputs = inputs
        self.seconds["reference"] = time.perf_counter() - t0
        spec = self.job.timing_set
        stats = None
        if spec is not None:
            # The task's timing set: its outputs are stored once for every later evaluation, and the
            # serial reference is timed on it, as the candidates are, once for every executor of the
            # host (the replicas share the store). Only the job whose executor claimed the task's
            # preparation does either (may_prepare); another waits until that executor has adopted
            # what its worker made, and prepares only what is still missing then. Every one of the
            # task's timing sets is made (the trials rotate through them); the reference is timed on
            # the first.
            count, timed = self.job.options.timing_sets, self.job.time_reference
            variants = timingset.variants(spec, count)
            if not timingset.prepared(spec, count, timed) and (
                self.job.may_prepare or not self._await_preparation(spec, count, timed)
            ):
                stats = self._prepare(spec, variants)
            if timed and stats is None:
                stats = timingset.load_reference_timing(spec)
        elif self.job.time_reference and timing_inputs is not None:
            stats = self._time(timing_inputs)
        return ReferenceOutcome(ok=True, reference_timing=stats, seconds=self.seconds)

    def _await_preparation(self, spec: timingset.TimingSetSpec, count: int, timed: bool) -> bool:
        """Wait for the job that holds the task's claim (stage ``timing_set_wait``); whether the task is
        prepared then."""
        write_progress(self.job.progress_path, "timing_set_wait")
        t1 = time.perf_counter()
        done = timingset.await_preparation(spec, count, timed)
        self.seconds["timing_set_wait"] = time.perf_counter() - t1
        return done

    def _prepare(
        self, spec: timingset.TimingSetSpec, variants: list[timingset.TimingSetSpec]
    ) -> TimingStats | None:
        """Make the timing sets that are not stored, in this worker's directory for the executor to
        adopt, and time the reference on the first (`spec`) unless that is known (the task's
        preparation lock held). The executor keeps the timing it returns."""
        fixed = None
        own = Path(self.job.result_path).parent
        for k, variant in enumerate(variants):
            if not timingset.stored(variant):
                write_progress(self.job.progress_path, "timing_set")
                t1 = time.perf_counter()
                drawn = generate_inputs(self.task, "timing", variant.seed, self.lib)
                timingset.store(timingset.handed_over(variant, own), self.task, drawn, self.call(drawn))
                fixed = drawn if k == 0 else fixed
                self.seconds["timing_set"] = self.seconds.get("timing_set", 0.0) + time.perf_counter() - t1
        if not self.job.time_reference:
            return None
        known = timingset.load_reference_timing(spec)
        if known is not None:
            return known
        fixed = fixed or timingset.load_inputs(spec, self.task)
        return self._time(fixed or generate_inputs(self.task, "timing", spec.seed, self.lib))

    def _time(self, timing_inputs: InputSet) -> TimingStats:
        """The serial reference timed on ``timing_inputs``."""
        write_progress(self.job.progress_path, "reference_timing")
        t1 = time.perf_counter()
        stats = time_reference(self.fn, self.task, timing_inputs, self.job.options.reference_repeats)
        self.seconds["reference_timing"] = time.perf_counter() - t1
        return stats


def time_reference(fn: Any, task: FunctionTask | KernelTask, inputs: InputSet, repeats: int) -> TimingStats:
    """The serial reference on one CPU core at the timing size (a few repeats: it is slow)."""
    samples = []
    for _ in range(repeats):
        work = inputs.copy()
        start = time.perf_counter()
        call_entry(fn, task, work.scalars, work.arrays)
        samples.append((time.perf_counter() - start) * 1e3)
    return timing_stats(samples)
