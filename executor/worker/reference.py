"""The reference worker: the task's own serial code on the evaluation's input sets.

It writes the expected outputs of every planned set as ``.npy`` files, stores the task's timing set
with its outputs when it is not stored yet (:mod:`executor.timingset`) and times the reference when
asked. Its failures are the task's, never a candidate's.
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
        if spec is not None:
            # The task's timing set: its outputs are stored once for every later evaluation, and the
            # serial reference is timed on it, as the candidates are.
            fixed = None
            # Every one of the task's timing sets (the trials rotate through them).
            for k, variant in enumerate(timingset.variants(spec, self.job.options.timing_sets)):
                if not timingset.stored(variant):
                    write_progress(self.job.progress_path, "timing_set")
                    t1 = time.perf_counter()
                    drawn = generate_inputs(self.task, "timing", variant.seed, self.lib)
                    timingset.store(variant, self.task, drawn, self.call(drawn))
                    fixed = drawn if k == 0 else fixed
                    self.seconds["timing_set"] = (
                        self.seconds.get("timing_set", 0.0) + time.perf_counter() - t1
                    )
            if self.job.time_reference:
                fixed = fixed or timingset.load_inputs(spec, self.task)
                timing_inputs = fixed or generate_inputs(self.task, "timing", spec.seed, self.lib)
        stats = None
        if self.job.time_reference and timing_inputs is not None:
            write_progress(self.job.progress_path, "reference_timing")
            t1 = time.perf_counter()
            stats = time_reference(self.fn, self.task, timing_inputs, self.job.options.reference_repeats)
            self.seconds["reference_timing"] = time.perf_counter() - t1
        return ReferenceOutcome(ok=True, reference_timing=stats, seconds=self.seconds)


def time_reference(fn: Any, task: FunctionTask | KernelTask, inputs: InputSet, repeats: int) -> TimingStats:
    """The serial reference on one CPU core at the timing size (a few repeats: it is slow)."""
    samples = []
    for _ in range(repeats):
        work = inputs.copy()
        start = time.perf_counter()
        call_entry(fn, task, work.scalars, work.arrays)
        samples.append((time.perf_counter() - start) * 1e3)
    return timing_stats(samples)
