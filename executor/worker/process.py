"""The worker process: start-up, one job, the outcome written for the parent (see :mod:`executor.worker`)."""

from __future__ import annotations

import contextlib
import logging
import resource
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from executor.checking import prime as prime_statistics
from executor.errors import ExecutorError
from executor.fleet.pinning import WorkerCores
from executor.gpulock import (
    context_creation,
    context_lock_covers_init,
    function_checks,
    function_reserve,
    function_run,
    function_run_shared,
    gpu_lock,
    gpu_shared,
    host_copies,
    kernel_reserve,
    kernel_run,
)
from executor.taskformat import KernelTask
from executor.verdict import ErrorKind
from executor.worker.baseline import BaselineWorker
from executor.worker.candidate import RunLocks, Worker
from executor.worker.gpu import GpuContext
from executor.worker.host import host_peak
from executor.worker.messages import (
    BaselineOutcome,
    CandidateRun,
    ReferenceJob,
    ReferenceOutcome,
    WorkerJob,
    WorkerOutcome,
    write_result,
)
from executor.worker.reference import ReferenceWorker
from executor.worker.runtime import CandidateFailed

logger = logging.getLogger(__name__)


def _limit_memory(limit: int | None, uses_cuda: bool) -> None:
    # RLIMIT_AS breaks CUDA (the driver reserves huge virtual ranges), so on the GPU path the parent
    # watches resident memory instead; elsewhere the kernel enforces the limit here.
    if limit is not None and not uses_cuda:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _failure(kind: ErrorKind, message: str, seconds: dict[str, float]) -> WorkerOutcome:
    return WorkerOutcome(passed=False, stage="correctness", error=kind, message=message, seconds=seconds)


def serve_reference(job_path: str) -> int:
    """Run one reference job (the task's own code; its failures are the task's, not a candidate's)."""
    job = ReferenceJob.model_validate_json(Path(job_path).read_text())
    _limit_memory(job.memory_limit_bytes, uses_cuda=False)
    try:
        outcome = ReferenceWorker(job).run()
    except (ExecutorError, OSError) as e:
        outcome = ReferenceOutcome(ok=False, message=str(e))
    except MemoryError as e:
        outcome = ReferenceOutcome(ok=False, message=f"the reference exhausted host memory: {e}")
    write_result(job.result_path, outcome)
    return 0


# This worker's cores (its executor's split of REGRAPH_EXECUTOR_TIMING_CORES, off by default;
# executor.fleet.pinning): the rest, the reserved ones while a function task's trials hold their lock.
CORES = WorkerCores()


def on_timing_cores(
    lock: Callable[[], contextlib.AbstractContextManager[None]],
) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """``lock``, and once it is held this worker on the timing cores (:meth:`WorkerCores.trials`) until
    it is let go: host-timed trials on cores that no compile, and no other worker, uses."""

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        with lock(), CORES.trials():
            yield

    held.__wrapped__ = lock  # type: ignore[attr-defined]  # which lock it takes (inspect.unwrap)
    return held


TIMED_RUN = on_timing_cores(function_run)
TIMED_RUN_SHARED = on_timing_cores(function_run_shared)


# A kernel's trials are timed on the device with events, which other processes' shared GPU work does not
# reach, except uploads; a function's calls are timed on the host clock, copies from host memory
# included. Only the untimed checks let other workers' preparation go on beside them; a kernel's
# checks, only the preparation begun before its run (executor.gpulock). The naive baseline's run holds
# a function candidate's.
KERNEL_LOCKS = RunLocks(checking=gpu_shared, timing=kernel_run, reserve=kernel_reserve)
# Once a function candidate's GPU work is over, its host checks hold the host memory shared (they read
# every copy: traffic that other function tasks' host-timed trials must not see), not the GPU.
FUNCTION_LOCKS = RunLocks(
    checking=function_checks, timing=TIMED_RUN, reserve=function_reserve, after_release=host_copies
)
# Without release_gpu_early (CandidateRun.release_gpu): no note, every check under the trials' locks.
FUNCTION_LOCKS_KEPT = RunLocks(checking=function_checks, timing=TIMED_RUN, reserve=function_reserve)
# A compute-bound task's (CandidateRun.host_shared): its trials hold the host memory shared.
COMPUTE_LOCKS = RunLocks(
    checking=function_checks, timing=TIMED_RUN_SHARED, reserve=function_reserve, after_release=host_copies
)
COMPUTE_LOCKS_KEPT = RunLocks(checking=function_checks, timing=TIMED_RUN_SHARED, reserve=function_reserve)


def function_locks(run: CandidateRun) -> RunLocks:
    """The locks of a function task's run (a candidate's or its naive baseline's): its trials hold the
    host memory shared when the parent knows the task to be compute-bound (``run.host_shared``), else
    alone; its host checks after an early release under the host memory's lock shared."""
    if run.host_shared:
        return COMPUTE_LOCKS if run.release_gpu else COMPUTE_LOCKS_KEPT
    return FUNCTION_LOCKS if run.release_gpu else FUNCTION_LOCKS_KEPT


def _next_run() -> CandidateRun | None:
    """The run the parent hands over once the product is built (a file named on stdin); None when it
    sends an empty line instead or is gone."""
    line = sys.stdin.readline().strip()
    return CandidateRun.model_validate_json(Path(line).read_text()) if line else None


def serve_candidate(job_path: str, gpu: GpuContext | None) -> int:
    """Prepare a candidate job, wait for the compiled candidate, run it and write the outcome."""
    job = WorkerJob.model_validate_json(Path(job_path).read_text())
    _limit_memory(job.memory_limit_bytes, uses_cuda=job.runtime == "gpu")
    worker = Worker(job, gpu)
    try:
        try:
            worker.prepare()
            run = _next_run()
            if run is None:  # cancelled (the candidate did not compile, or the parent is gone)
                return 0
            locks = KERNEL_LOCKS if isinstance(job.task, KernelTask) else function_locks(run)
            outcome = worker.run(run, locks)
        except ExecutorError as e:  # the task's own reference or generator failed, not the candidate
            outcome = _failure(ErrorKind.REFERENCE_ERROR, str(e), worker.seconds)
        except MemoryError as e:
            outcome = _failure(ErrorKind.OUT_OF_MEMORY, f"host memory exhausted: {e}", worker.seconds)
        # The result first: the parent kills this process as soon as it is there, so tearing down
        # the context would only delay the verdict.
        write_result(job.result_path, outcome)
    finally:
        if worker.gpu is not None:
            worker.gpu.close()
    return 0


def serve_baseline(runtime: str) -> int:
    """``python -m executor.worker baseline candidate {gpu|host}``: time one task's naive baseline
    (:mod:`executor.worker.baseline`) in a process that loads no candidate's code. Its job comes as a
    candidate worker's does: a :class:`WorkerJob`, then a :class:`CandidateRun` naming the baseline's
    product (an empty line instead cancels); it writes a :class:`BaselineOutcome`."""
    prime_statistics()
    gpu = (
        GpuContext.create_or_none(context_creation, context_lock_covers_init()) if runtime == "gpu" else None
    )
    job_path = sys.stdin.readline().strip()
    if not job_path:
        if gpu is not None:
            gpu.close()
        return 0
    job = WorkerJob.model_validate_json(Path(job_path).read_text())
    _limit_memory(job.memory_limit_bytes, uses_cuda=job.runtime == "gpu")
    worker = BaselineWorker(job, gpu)
    try:
        try:
            worker.prepare()
            run = _next_run()
            if run is None:
                return 0
            # a function candidate's trials' locks (shared host memory only for a compute-bound task)
            outcome = worker.time_baseline(run, COMPUTE_LOCKS if run.host_shared else FUNCTION_LOCKS)
        except (ExecutorError, CandidateFailed, OSError) as e:
            outcome = BaselineOutcome(ok=False, message=f"the baseline failed: {e}", seconds=worker.seconds)
        except MemoryError as e:
            outcome = BaselineOutcome(ok=False, message=f"host memory exhausted: {e}", seconds=worker.seconds)
        write_result(job.result_path, outcome)
    finally:
        if worker.gpu is not None:
            worker.gpu.close()
    return 0


def probe(runtime: str) -> int:
    """The runtime jail's start-up check (``python -m executor.worker probe candidate RUNTIME``, see
    :func:`executor.sandbox.worker_protection`): what a candidate worker needs before its job works
    here, or this exits non-zero and says what failed."""
    prime_statistics()
    if runtime == "gpu":
        GpuContext(gpu_shared).close()  # the driver, the devices and a context
    with function_checks():  # the lock files (when the parent names them)
        pass
    Path("probe").write_text("ok")  # its own directory is writable
    write_result("result.json", ReferenceOutcome(ok=True))  # and the done pipe reaches the parent
    sys.stderr.write("probe ok\n")
    return 0


def measure(runtime: str) -> int:
    """``python -m executor.worker peak candidate {gpu|host}``: the device's figures for the physical
    floor (:mod:`executor.floor`), measured by a worker that loads no candidate's code, with every
    trial's locks held; the executor reads them from the result and keeps them (:mod:`executor.peak`)."""
    if runtime == "gpu":
        gpu = GpuContext(gpu_shared)
        try:
            with kernel_run(), gpu_lock("exclusive", "host"):
                peak = gpu.measure_peak()
        finally:
            gpu.close()
    else:
        with gpu_lock("exclusive", "host"):
            peak = host_peak()
    write_result("result.json", peak)
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``python -m executor.worker serve {candidate|reference} {gpu|host|none}``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(argv) == 3 and argv[0] == "probe":
        return probe(argv[2])
    if len(argv) == 3 and argv[0] == "peak":
        return measure(argv[2])
    if len(argv) == 3 and argv[0] == "baseline":
        CORES.start()
        return serve_baseline(argv[2])
    if len(argv) != 3 or argv[0] != "serve" or argv[1] not in ("candidate", "reference"):
        sys.stderr.write("usage: python -m executor.worker serve {candidate|reference} {gpu|host|none}\n")
        return 2
    role, runtime = argv[1], argv[2]
    CORES.start()  # off the timing cores before anything starts (the driver's threads inherit it)
    # Start-up that every job needs is done before the job arrives: that is what a spare pre-warms.
    prime_statistics()
    gpu = None
    if role == "candidate" and runtime == "gpu":
        # Only the context's creation holds the lock (the driver is loaded before), shared: another
        # process's context creation does not show in event-timed trials, and a function task's
        # trials, timed on the host clock, hold the lock alone (executor.gpulock).
        gpu = GpuContext.create_or_none(context_creation, context_lock_covers_init())
    job_path = sys.stdin.readline().strip()
    if not job_path:
        if gpu is not None:
            gpu.close()
        return 0
    if role == "reference":
        return serve_reference(job_path)
    return serve_candidate(job_path, gpu)
