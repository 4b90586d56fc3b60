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
from executor.worker.host import FunctionRuntime
from executor.worker.messages import PREPARED, BaselineOutcome, CandidateRun, notify_parent

# The baseline's pilot calls (BaselineWorker.pilot_ms): at least PILOT_MIN_CALLS (a first call may load
# the module, on a GPU lazily, and read cold memory: never the only one), at most PILOT_CALLS, and no
# more once PILOT_MS milliseconds have been spent (a warm-up's least).
PILOT_MIN_CALLS = 2
PILOT_CALLS = 3
PILOT_MS = 30.0


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

    def time_baseline(
        self, run: CandidateRun, locks: RunLocks | None = None, pilot_locks: RunLocks | None = None
    ) -> BaselineOutcome:
        """Load ``run.baseline_product`` (under ``locks.checking``) and time it (under ``locks.timing``),
        as a candidate's trials are timed (:meth:`Worker.timing`), the whole run reserving
        ``locks.reserve``. With ``run.host_pilot_above_ms`` and ``pilot_locks`` (the compute-bound
        locks): first a few pilot calls under ``locks.timing`` (:meth:`pilot_ms`); when the fastest
        took longer than that, the trials hold ``pilot_locks.timing`` instead (the host memory shared),
        taken after ``locks.timing`` is let go (the run's reservation kept, so no new holder of the
        GPU gets in meanwhile; ``pilot_shared`` in the outcome's seconds)."""
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
                slots = make_slots(self.task, self.gpu, self.timing_sources, opts, warm=self.warm_source)
                self._add_seconds("baseline_copies", t1)
            if (
                run.host_pilot_above_ms is not None
                and pilot_locks is not None
                and pilot_locks.timing is not None
                and locks.timing is not None
                and isinstance(baseline, FunctionRuntime)
                # a runner (the opt-in candidate process) takes calls on its mappings only: no pilot
                and baseline.confirms
            ):
                fastest = self.pilot_ms(baseline)
                self.seconds["pilot_ms"] = fastest  # not seconds: the fastest pilot call's milliseconds
                shared = fastest > run.host_pilot_above_ms
                self.seconds["pilot_shared"] = float(shared)  # not seconds: how the trials held the host
                if shared:
                    held.close()
                    held.enter_context(self._holding(pilot_locks.timing, "pilot_relock_wait"))
            if self.gpu is not None:
                self.gpu.reset_timing_state()
            t2 = time.perf_counter()
            stats, last = baseline.time(slots, opts)
            baseline.check_copies(last)
            self._add_seconds("baseline_timing", t2)
        return BaselineOutcome(ok=True, timing=stats, device=baseline.device, seconds=self.seconds)

    def pilot_ms(self, baseline: FunctionRuntime) -> float:
        """The fastest of :data:`PILOT_MIN_CALLS` to :data:`PILOT_CALLS` calls of the baseline on a
        timing-size set that is never timed (the warm-up's; else the first timing set), each prepared
        and timed as a timed call (:meth:`FunctionRuntime.first_visit`), stopping once :data:`PILOT_MS`
        have been spent: what
        decides whether the trials may hold the host memory shared (``pilot_shared``). Untimed for the
        baseline's timing: its trials' warm-up follows."""
        t0 = time.perf_counter()
        source = self.warm_source or self.timing_sources[0]
        fastest = float("inf")
        for n in range(PILOT_CALLS):
            elapsed, _ = baseline.first_visit(source, f"pilot call {n + 1}")
            fastest = min(fastest, elapsed)
            if n + 1 >= PILOT_MIN_CALLS and (time.perf_counter() - t0) * 1e3 >= PILOT_MS:
                break
        self._add_seconds("pilot", t0)
        return fastest
