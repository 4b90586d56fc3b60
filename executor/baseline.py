"""The naive baseline's timing, measured where no candidate's code runs and kept by the executor alone.

A function task's ``naive.cu`` gives every candidate of the task its ``baseline_speedup``, and its
timing is kept for a day and shared by the host's executors (:mod:`executor.basetiming`). It used to
be timed inside the candidate's worker, after the candidate's trials, in the process that had loaded
the candidate's library: a library that, once loaded, slows what runs after it in its process (a
constructor that changes the allocator or the floating-point state, hooks a call the baseline makes,
keeps a thread busy) inflated its own baseline speedup and planted a slow baseline that the task's
later, honest candidates were measured against for a day. So, as the device's figures are
(:mod:`executor.peak`), the baseline is timed by a worker that loads no candidate's code (``python -m
executor.worker baseline``, :mod:`executor.worker.baseline`): the same jail, the same GPU locks, the
task's rotated timing sets and the same trials as a candidate's run, with copies of its own. The
executor reads its result and alone keeps the record, which names its source
(:data:`executor.basetiming.BASELINE_WORKER`).

:func:`measure` runs one such worker: started at once, it prepares (inputs, copies, on a GPU its CUDA
context) while ``naive.cu`` compiles, and is handed the build when that is done. The evaluator runs it
once per task, timing options and device model (again after ``baseline_timing_max_age_s``), beside the
first evaluation of the task that needs it, and that evaluation's verdict waits for it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from executor.errors import EvaluationCancelled, ExecutorError
from executor.sandbox import WorkerPool
from executor.verdict import ErrorKind
from executor.worker.messages import BaselineOutcome, CandidateRun, WorkerJob

logger = logging.getLogger(__name__)

# A failed measurement is tried again after this long (meanwhile the task's verdicts carry no
# baseline speedup).
RETRY_AFTER_S = 300.0
# How long a finished worker's teardown may keep the baseline's trials waiting (as a candidate's).
TEARDOWN_WAIT_S = 10.0
# The outcome of a baseline whose naive.cu does not compile (never tried again).
NOT_BUILT = "naive.cu does not compile"


def measure(
    pool: WorkerPool,
    job: WorkerJob,
    build: Callable[[], str | None],
    timeout_s: float,
    memory_limit_bytes: int | None = None,
    stopping: threading.Event | None = None,
    turn: Callable[[], AbstractContextManager[object]] | None = None,
    host_shared: Callable[[], bool] | None = None,
) -> BaselineOutcome:
    """Time a task's naive baseline in a worker of its own for ``pool``'s runtime and GPU lock: the worker
    starts now with ``job`` (the task, its timing sets, the timing options); ``build()`` (called
    meanwhile, in this thread) returns the baseline's product, or None when it does not compile. Each
    wait is bounded by ``timeout_s``, and ends once ``stopping`` is set (the executor closes); a
    failure is an outcome that says why, never an exception. ``host_shared()`` (asked in its turn):
    whether the task is known to be compute-bound (from a baseline median kept before, never a
    candidate's), so that the trials hold the host memory's lock shared
    (:func:`executor.gpulock.compute_bound`; the outcome's ``seconds["host_shared"]``); without it,
    alone."""
    try:
        proc = pool.start_command("baseline")
    except (ExecutorError, OSError) as e:
        return BaselineOutcome(ok=False, message=f"the baseline worker could not start: {e}")
    try:
        proc.send_job(job, memory_limit_bytes)
        product = build()
        if product is None:
            return BaselineOutcome(ok=False, message=NOT_BUILT)
        proc.wait_prepared(timeout_s, stopping)
        shared = False
        with turn() if turn is not None else contextlib.nullcontext():
            # Finished workers' teardown (their CUDA context, their memory) would land in the
            # baseline's host-timed trials, as in a candidate's (Evaluator._hold_through_teardown).
            if not pool.drain(timeout_s=TEARDOWN_WAIT_S):
                logger.warning("a finished worker is still being torn down; timing the baseline anyway")
            run = CandidateRun(
                candidate_product="",
                candidate_symbol=job.task.entry,
                baseline_product=product,
                host_shared=(shared := host_shared() if host_shared is not None else False),
            )
            proc.send("run.json", proc.admit(run))
            killed_for = proc.wait(
                timeout_s, memory_limit_bytes, watch_rss=pool.runtime == "gpu", cancelled=stopping
            )
        exceeded = proc.memory_exceeded()
        if exceeded is not None:
            return BaselineOutcome(
                ok=False,
                message=f"the baseline worker ran out of its memory limit (its memory cgroup: {exceeded})",
            )
        # Read without following a link or opening a FIFO: an inline task's naive.cu runs in this worker
        # (review 41 H1's rest).
        outcome = proc.read_result(BaselineOutcome)
        if outcome is not None:
            outcome.seconds["host_shared"] = float(shared)  # not seconds: how its trials held the host
            return outcome
        if killed_for is ErrorKind.TIMEOUT:
            return BaselineOutcome(ok=False, message=f"the baseline worker was killed after {timeout_s:.0f}s")
        if killed_for is ErrorKind.OUT_OF_MEMORY:
            return BaselineOutcome(ok=False, message="the baseline worker ran out of its memory limit")
        tail = proc.stderr_tail().strip()[-800:]
        return BaselineOutcome(
            ok=False,
            message=f"the baseline worker exited ({proc.returncode}) during {proc.stage_text()}: {tail}",
        )
    except EvaluationCancelled:
        return BaselineOutcome(ok=False, message="the baseline worker was stopped: the executor closes")
    except (ExecutorError, OSError, ValueError) as e:
        return BaselineOutcome(ok=False, message=f"the baseline worker failed: {e}")
    finally:
        pool.discard(proc)
