"""The baseline worker's flow: time a function task's naive CUDA baseline (``naive.cu``) and nothing else.

A candidate worker loads the candidate's library into its own process, and whatever that library does
when it loads (a constructor that changes the process's allocator or floating-point state, hooks a
call, keeps a thread busy) reaches every later call of that process. So the baseline, whose timing is
kept for a task's later candidates and shared by the host's executors (:mod:`executor.basetiming`),
is timed here, in a process that never loads a candidate's code (``python -m executor.worker baseline
candidate RUNTIME``, started by :mod:`executor.baseline`): in the same jail and under the same GPU
locks as a candidate's run, on copies of the same rotated timing sets made the same way, with the
same trials. :meth:`BaselineWorker.prepare` runs while ``naive.cu`` compiles; the second line of the
job names a :class:`~executor.worker.messages.CandidateRun` whose ``baseline_product`` is the build.
"""

from __future__ import annotations

import contextlib
import functools
import time

from executor.gpulock import host_copies
from executor.inputs import generate_inputs
from executor.worker.candidate import RunLocks, Worker
from executor.worker.gpu import make_slots
from executor.worker.messages import PREPARED, BaselineOutcome, CandidateRun, notify_parent


class BaselineWorker(Worker):
    """Times one task's naive baseline on the task's timing sets (function tasks)."""

    def prepare(self) -> None:
        """The timing sources (the task's timing sets, or the fresh timing-size sets) and, when the job
        asks (``baseline_copies``, the executor's ``baseline_copies_ahead``), their rotated copies, made
        before the trials and off their lock (a chunk at a time under the host copies' lock)."""
        t0 = time.perf_counter()
        self.progress("inputs")
        self.sets = [generate_inputs(self.task, size, seed, self.reference_lib) for seed, size in self.plan]
        self.seconds["inputs"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        self.timing_sources = self._timing_sources()
        if self.job.baseline_copies:
            self.seconds["prepare_lock_wait"] = 0.0
            self.slots = self._prepared_slots(
                functools.partial(self._holding, host_copies, "prepare_lock_wait")
            )
        self.seconds["timing_inputs"] = time.perf_counter() - t1
        self.ready_at = time.monotonic()
        self.progress(PREPARED)
        notify_parent()

    def time_baseline(self, run: CandidateRun, locks: RunLocks | None = None) -> BaselineOutcome:
        """Load ``run.baseline_product`` (under ``locks.checking``) and time it (under ``locks.timing``),
        as a candidate's trials are timed (:meth:`Worker.timing`), the whole run reserving
        ``locks.reserve``."""
        if not run.baseline_product:
            return BaselineOutcome(
                ok=False, message="the run names no baseline product", seconds=self.seconds
            )
        locks = locks or RunLocks()
        opts = self.job.options
        if not self.timing_sources:
            self.prepare()
        with locks.reserve(), contextlib.ExitStack() as held:
            held.enter_context(self._holding(locks.checking, "run_lock_wait"))
            self.progress("baseline")
            t0 = time.perf_counter()
            baseline = self.runtime_for(run.baseline_product, self.task.entry)
            self._add_seconds("load", t0)
            if locks.timing is not None:
                held.close()
                held.enter_context(self._holding(locks.timing, "timing_lock_wait"))
            t1 = time.perf_counter()
            slots = self.slots
            if slots is None:  # not made ahead (or that failed): made here, under the trials' lock
                slots = make_slots(
                    self.task,
                    self.gpu,
                    self.timing_sources,
                    opts,
                    warm=self.warm_source,
                    shared=self.use_runner,  # a runner's calls read shared mappings (as Worker.timing's)
                    page_locks=self.page_locks(),
                )
                self._add_seconds("baseline_copies", t1)
            self.note_page_locks()
            if self.gpu is not None:
                self.gpu.reset_timing_state()
            t2 = time.perf_counter()
            stats, last = baseline.time(slots, opts)
            self.recheck_page_locks()
            baseline.check_copies(last)
            self._add_seconds("baseline_timing", t2)
        return BaselineOutcome(ok=True, timing=stats, device=baseline.device, seconds=self.seconds)
