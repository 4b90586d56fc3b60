"""The evaluation pipeline: static checks -> compile -> isolated correctness and timing -> Verdict."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import math
import resource
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Literal

import numpy as np

from executor import baseline as baseline_worker
from executor import linkcheck
from executor.basetiming import BaselineTimings, baseline_key
from executor.cache import content_key
from executor.cgroup import placement
from executor.compile import DEFAULT_ARCH, INCLUDE_REFUSED, Compiler, RemoteBuilds, device_arch, kernel_symbol
from executor.devcompare import compare_source
from executor.errors import EvaluationCancelled, EvaluationExpired, ExecutorError, ReferenceBuildError
from executor.gpulock import (
    compute_bound,
    held_elsewhere,
    hold,
    hold_now,
    hold_soon,
    host_shared_below_gbps,
)
from executor.gputurns import GpuTurns, Kind, Turn
from executor.jail import JAIL_UID, AnyOf, host_toolchain_paths, is_root, protection
from executor.peak import device_peak
from executor.protocol import BaselineState, CandidateSource, EvaluateRequest, EvaluationOptions
from executor.reach import ReachError, refusal, unreachable
from executor.reference import build_reference, reference_timeout_s
from executor.runlimit import RunLimit, run_limit
from executor.sandbox import (
    PreparedEvaluation,
    WorkerPool,
    WorkerProcess,
    finish_candidate,
    finish_reference,
    jail_workers_enabled,
    require_worker_reach,
    start_candidate,
    start_reference,
)
from executor.settings import ExecutorSettings
from executor.static import check_source
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask
from executor.timingset import TimingSetSpec, timing_secret, timing_set_spec
from executor.timingset import prune as prune_timing_sets
from executor.timingset import variants as timing_set_variants
from executor.verdict import CompileResult, ErrorKind, Stage, TimingStats, Verdict, reward_for
from executor.worker.messages import (
    REPEAT_CONFIRM_CALLS,
    BaselineOutcome,
    CandidateRun,
    ReferenceJob,
    ReferenceOutcome,
    WorkerJob,
    seeds_needed,
)
from executor.worker.runner import candidate_process, candidate_process_mode

logger = logging.getLogger(__name__)
# What one confirming call of the repeat-visit rule may add to a run beyond the call itself: a fresh
# runner's start, load and warm-up (0.25-0.35 s on the 2-core dev machine's host runtime, session 38;
# on a GPU it also makes its own CUDA context), with room for a loaded host.
CONFIRMING_PROCESS_S = 2.0
# How often the pass through the host memory's lock before a function run's turn tries that lock.
HOST_GATE_POLL_S = 0.01
# How long the evaluator tries for the device's locks (shared) at a function candidate's release
# (`executor.gpulock.hold_soon`): the requests that waited during the run pass their turnstiles then.
RELEASE_TRY_S = 0.1
# How long the evaluator's hold for a released worker waits for that worker to be gone, at most.
RELEASED_GONE_S = 30.0


class Evaluator:
    """Evaluates candidates; thread-safe. Compiles run concurrently, GPU work is serialised.

    One evaluation overlaps what does not depend on the candidate with its compile: a reference worker
    computes the expected outputs for the candidate's fresh seeds (and, the first time for a task,
    stores the task's timing set with its outputs and times the serial reference), and the candidate's
    worker, already started, generates the same inputs, loads the timing set and makes its rotated
    copies. After the verdict, the workers of the task's next candidate are prepared in the background
    and the finished workers are reaped there too. Call :meth:`close` to stop the spare workers.
    """

    def __init__(self, settings: ExecutorSettings, remote_builds: RemoteBuilds | None = None) -> None:
        """``remote_builds``: where compiles go instead of this host's CPUs (a fleet's compile workers)."""
        self.settings = settings
        # Each worker's memory cgroup (executor.cgroup): where they are made, found once per process and
        # first of all, before this evaluator starts any thread or process (review 40 M1): on cgroup v2
        # the executor may move itself into a leaf of its cgroup, which no process of its may share then
        # (a compile of the comparison kernels started before would turn the cgroups off, or not, by
        # how soon it started).
        self.cgroups = placement(
            settings.memory_cgroups, jailed=jail_workers_enabled(), pids_max=settings.memory_cgroup_pids
        )
        host_shared_below_gbps()  # a bad REGRAPH_HOST_SHARED_BELOW_GBPS stops the start, not each run
        candidate_process_mode()  # ... and so does a bad REGRAPH_EXECUTOR_CANDIDATE_PROCESS
        detected = device_arch()
        self.arch = settings.arch if settings.arch != "auto" else (detected or DEFAULT_ARCH)
        self.runtime: Literal["gpu", "host", "none"] = self._choose_runtime(
            settings.runtime, detected is not None
        )
        self.compiler = Compiler.from_settings(settings, self.arch, remote=remote_builds)
        if is_root() and protection() == "uid":
            # No namespaces: workers and compiles run as other uids that open what they need through
            # the host's directories; checked now, as those uids, or every candidate fails later.
            self._check_uid_reach(settings.cache_dir, local_builds=remote_builds is None)
        if self.runtime_checks_available:
            # Where function candidates run (under ``auto``, a runner's confinement probed now, once):
            # a warning where they run in their workers.
            runner, where = candidate_process()
            logger.log(logging.INFO if runner else logging.WARNING, "%s", where)
        self._timing_cache: dict[tuple[str, str], TimingStats] = {}
        # When each baseline timing in memory goes stale (time.monotonic()): as on disk, after
        # baseline_timing_max_age_s from its measurement, so a long-running executor times it again.
        self._baseline_stale_at: dict[tuple[str, str], float] = {}
        self._cache_lock = threading.Lock()
        # The naive baselines' timings on disk, shared with the host's other executors and kept across
        # restarts (executor.basetiming); used once this evaluator knows its device's model (from the
        # device's figures, measured by a worker of their own, or the first run's outcome: the parent
        # process never opens the device itself).
        self._baselines = (
            BaselineTimings(settings.cache_dir / "baseline-timings", settings.baseline_timing_max_age_s)
            if settings.baseline_timing_cache
            else None
        )
        self.device: str | None = None
        # The baseline measurements started (executor.baseline), by baseline_key: the outcome's future
        # and when it was started; and the event that stops them when the evaluator closes.
        self._baseline_runs: dict[str, tuple[Future[BaselineOutcome], float]] = {}
        self._baseline_lock = threading.Lock()
        self._closing = threading.Event()
        # At most this many baseline workers at once (each has its CUDA context, the task's timing sets
        # and their copies): a batch of new tasks queues its measurements here.
        self._baseline_threads = ThreadPoolExecutor(
            max_workers=settings.baseline_workers, thread_name_prefix="executor-baseline"
        )
        self._threads = ThreadPoolExecutor(
            max_workers=2 * settings.compile_workers, thread_name_prefix="executor-compile"
        )
        # The comparison kernels of executor.devcompare, built once (from the compile cache after the
        # first start) while the first candidate compiles.
        self._comparison: Future[str | None] | None = (
            self._threads.submit(self._build_comparison) if self.runtime == "gpu" else None
        )
        self.pool = WorkerPool(
            self.runtime,
            prewarm=settings.prewarm_workers,
            timing_cores=settings.timing_cores,
            cgroups=self.cgroups.place,
        )
        # One candidate's run at a time on the GPU, in arrival order or kernel runs first while the
        # device is busy for a function task's trials (executor.gputurns, gpu_kernel_first).
        self.turns = GpuTurns(
            kernel_first=settings.gpu_kernel_first,
            max_skips=settings.gpu_kernel_first_skips,
            busy=self._busy_for_host_timing,
        )
        # How long this evaluator held the device's locks for released workers (Evaluator.evaluate's
        # release): a run's limit is not charged for it (WorkerProcess.wait's held_for_released).
        self._released_holds = _HeldTime()
        self.pool.replenish("reference")
        if self.runtime_checks_available:
            self.pool.replenish("candidate")
        self._preparing: Future[None] | None = None
        self._prepare_lock = threading.Lock()
        self._prepares_started = 0
        self._in_flight = 0  # evaluations in this evaluator now (evaluate() calls not returned)
        self._in_flight_lock = threading.Lock()
        # Tasks whose reference is being built, timing set stored and serial reference timed ahead of
        # their first candidate (prepare_task); an evaluation of such a task waits for that instead of
        # doing it again.
        self._tasks_preparing: dict[tuple[str, str], Future[None]] = {}
        self._task_threads = ThreadPoolExecutor(
            max_workers=settings.compile_workers, thread_name_prefix="executor-task-prepare"
        )

    def _check_uid_reach(self, cache_dir: Path, local_builds: bool) -> None:
        """Raise :class:`executor.reach.ReachError` (the executor does not start) when a worker's uid
        (:func:`executor.sandbox.require_worker_reach`, with the jail of the workers on) or a local
        compile's (:data:`executor.jail.JAIL_UID`: nvcc, the host compiler, the build directories under
        ``cache_dir``) cannot reach what it needs. One ``/bin/sh`` as each uid (a few ms)."""
        if jail_workers_enabled():
            require_worker_reach(cache_dir)
        if not local_builds:
            return
        needed: list[tuple[str, Path]] = [
            ("the host compiler's files", Path(p)) for p in host_toolchain_paths()
        ]
        with contextlib.suppress(ExecutorError):  # no nvcc: host builds only, said where they fail
            chain = self.compiler.toolchain
            needed += [("nvcc", chain.nvcc), ("the CUDA toolkit", chain.root)]
        needed += [("the build directory's parent", cache_dir / sub) for sub in ("candidates", "reference")]
        problems = unreachable(needed, JAIL_UID, JAIL_UID)
        if problems:
            raise ReachError(
                refusal(problems, f"the compiles (as uid {JAIL_UID}: no namespaces here)", workers=False)
            )

    @functools.cached_property
    def timing_secret(self) -> bytes:
        """The secret this executor's timing seeds are drawn with (:func:`executor.timingset.timing_secret`)."""
        return timing_secret(self.settings.cache_dir)

    @property
    def timing_sets_dir(self) -> Path:
        """Where the tasks' timing sets are stored (see :mod:`executor.timingset`)."""
        return self.settings.cache_dir / "timing-sets"

    def stop_preparations(self) -> None:
        """Stop the tasks' preparations under way (their reference builds and reference workers:
        :meth:`prepare_task`) and the naive baselines' measurements, at their next step, and start
        none from now on: the service is shutting down, and a reference worker's job may run for
        three run limits. What they stored is whole (the store takes only whole entries, by renames);
        what they had not stored is left for the next start. :meth:`close` does this first."""
        self._closing.set()

    def close(self) -> None:
        """Stop the tasks' preparations (:meth:`stop_preparations`), the spare workers, the baseline
        measurements and the compile threads."""
        self.stop_preparations()
        self.wait_for_preparation()
        with self._baseline_lock:
            measuring = [future for future, _ in self._baseline_runs.values()]
        for future in measuring:  # each ends at its next wait (its build may finish first)
            with contextlib.suppress(FutureTimeout, CancelledError):
                future.result(timeout=self.settings.compile_timeout_s)
        self._baseline_threads.shutdown(wait=False, cancel_futures=True)
        self._task_threads.shutdown(wait=True, cancel_futures=True)
        self.pool.close()
        self._threads.shutdown(wait=False, cancel_futures=True)

    def wait_for_preparation(self) -> None:
        """Wait for the background preparation of the next evaluation, if one is running (the next
        evaluation does this by itself; tests that count processes need it)."""
        with self._prepare_lock:
            preparing, self._preparing = self._preparing, None
        if preparing is not None:
            with contextlib.suppress(CancelledError):  # close() cancelled it before it started
                preparing.result()

    @staticmethod
    def _choose_runtime(requested: str, has_gpu: bool) -> Literal["gpu", "host", "none"]:
        if requested in ("gpu", "host", "none"):
            return requested  # type: ignore[return-value]
        if has_gpu and importlib.util.find_spec("pycuda") is not None:
            return "gpu"
        return "none"

    @property
    def memory_cgroups(self) -> str:
        """Whether each worker runs in a memory cgroup of its own here, where, and why not
        (:func:`executor.cgroup.placement`)."""
        return self.cgroups.says

    @property
    def candidate_process(self) -> str | None:
        """Where a function candidate runs here, and why (:func:`executor.worker.runner.candidate_process`);
        None where no candidate runs."""
        return candidate_process()[1] if self.runtime_checks_available else None

    @property
    def runtime_checks_available(self) -> bool:
        """Whether correctness and timing can run here (a GPU with pycuda, or the test-only host mode)."""
        return self.runtime in ("gpu", "host")

    def evaluate(
        self,
        task: FunctionTask | KernelTask,
        candidate: CandidateSource,
        options: EvaluationOptions | None = None,
        cancelled: threading.Event | None = None,
        deadline: float | None = None,
    ) -> Verdict:
        """Run every stage that applies and return the verdict (never raises for candidate failures).

        Once ``cancelled`` is set (the caller went away), the evaluation stops at its next step: its
        wait for the reference, for the GPU or for the candidate's run, whose worker is killed; it
        raises :class:`EvaluationCancelled` and prepares nothing. An nvcc compile under way is killed,
        here or on a fleet's compile worker (nothing of it kept; an NVRTC compile, in this process or
        the worker's, finishes). One
        cancelled before it began (while it waited for a free slot) starts nothing: no compile, no
        worker. ``deadline`` (``time.monotonic()``): its request's limit from when it was accepted;
        past it, the evaluation is dropped (:class:`EvaluationExpired`) where it stands: before it
        starts (nothing compiled, no worker), after its compile, before it waits for its GPU turn and
        once that turn is granted (given back unused), even when nobody set ``cancelled`` (a replica
        whose router's cancel never came)."""
        if cancelled is not None and cancelled.is_set():
            raise EvaluationCancelled("not started: its caller went away while it waited for a slot")
        check_deadline(deadline, "not started")
        with self._in_flight_lock:
            self._in_flight += 1
        try:
            # An ``implausible`` verdict stands as it is: a second run on fresh workers (session 25,
            # removed by review 25) let a candidate that keeps its answers between runs pass the second.
            return self._evaluate(task, candidate, self.with_settings(options), cancelled, deadline)
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1

    @property
    def in_flight(self) -> int:
        """Evaluations under way in this evaluator now."""
        with self._in_flight_lock:
            return self._in_flight

    @property
    def gpu_busy(self) -> bool:
        """Whether a candidate holds the GPU now (its run, or the wait for the last one's teardown)."""
        return self.turns.locked()

    def _busy_for_host_timing(self) -> bool:
        """Whether a function task's trials, started now, would wait for other work on the device:
        finished workers still being torn down (``reap_wait``), or the GPU lock held by another
        process (a spare making its CUDA context, another executor's work)."""
        return not self.pool.drain(timeout_s=0.0) or held_elsewhere(self.pool.gpu_lock)

    @property
    def prepares_started(self) -> int:
        """How many times workers were started ahead for a next candidate (``prepare_next``)."""
        return self._prepares_started

    def _evaluate(
        self,
        task: FunctionTask | KernelTask,
        candidate: CandidateSource,
        options: EvaluationOptions,
        cancelled: threading.Event | None,
        deadline: float | None = None,
    ) -> Verdict:
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        violations = check_source(task, candidate.source)
        seconds["static"] = time.perf_counter() - t0
        if violations:
            return Verdict(
                task_id=task.id,
                stage=Stage.STATIC,
                passed=False,
                error=ErrorKind.STATIC_REJECTED,
                message="; ".join(f"{v.rule}: {v.reason}" for v in violations[:5]),
                static_violations=violations,
                reward=-1.0,
                seconds=seconds,
            )
        runtime = self._task_runtime(task)
        # Its nvcc is killed once the caller goes away or the executor stops: a compile of minutes
        # would otherwise hold its slot and the CPU for nobody (it was left to finish, session 33).
        stop = AnyOf(cancelled, self._closing)
        compiling = self._threads.submit(self.compiler.compile, task, candidate.source, stop)
        workers: list[WorkerProcess] = []
        try:
            verdict = self._run(
                task, candidate, options, runtime, compiling, workers, seconds, cancelled, deadline
            )
        finally:
            for worker in workers:
                self.pool.discard(worker)
            if not compiling.done():
                compiling.cancel()
        verdict.seconds["total"] = time.perf_counter() - t0
        with self._in_flight_lock:
            # Only an executor that this evaluation leaves idle prepares: while others are in flight
            # the next request is as likely another task's, and workers prepared for this one would
            # be stopped unused after computing its reference outputs and uploading its inputs,
            # taking CPU and the GPU lock from the evaluations in flight (a mixed queue).
            alone = self._in_flight == 1
        if (
            runtime != "none"
            and self.settings.prewarm_workers
            and self.settings.prepare_next
            and (alone or self.settings.prepare_next_when_busy)
        ):
            # In the background: the caller has its verdict now, and the workers of the next candidate
            # get the whole time the next candidate takes to write.
            with self._prepare_lock:
                try:
                    self._preparing = self._threads.submit(self._prepare_next, task, options, runtime)
                    self._prepares_started += 1
                except RuntimeError:  # closed meanwhile: nothing to prepare for
                    self._preparing = None
        return verdict

    def _run(
        self,
        task: FunctionTask | KernelTask,
        candidate: CandidateSource,
        options: EvaluationOptions,
        runtime: Literal["gpu", "host", "none"],
        compiling: Future[CompileResult],
        workers: list[WorkerProcess],
        seconds: dict[str, float],
        cancelled: threading.Event | None = None,
        deadline: float | None = None,
    ) -> Verdict:
        limit = self.settings.memory_limit_bytes
        with self._prepare_lock:
            ahead = self._tasks_preparing.get(self._key("reference", task))
        if ahead is not None and not ahead.done():
            waited = time.perf_counter()
            with contextlib.suppress(CancelledError):
                ahead.result()  # never raises: failures are logged, and the evaluation does it itself
            seconds["task_prepare_wait"] = time.perf_counter() - waited
        try:
            reference = build_reference(task, self.settings.cache_dir)
        except ReferenceBuildError as e:
            compiled = compiling.result()
            seconds["compile"] = compiled.seconds
            return _reference_failure(task, Stage.COMPILE, str(e), compiled, seconds)
        # The naive baseline, timed by a worker of its own beside this evaluation when not known yet.
        measuring = self._measure_baseline(task, options, runtime, reference)
        # the timing kept now, should it go stale before the verdict (it is not measured again for this
        # one); looked up only where verdicts carry a baseline (no store read for a kernel task's)
        wanted = measuring is None and self.wants_baseline(task, options, runtime)
        kept_baseline = self._kept_baseline(task, options) if wanted else None
        key = self._prepared_key(task, options, runtime)
        ref_started = time.perf_counter()
        self.wait_for_preparation()
        prepared = self.pool.take_prepared(key) if self.settings.prepare_next else None
        if prepared is not None:
            logger.info("%s: using workers prepared for this task", task.id)
        else:
            # Given up meanwhile (its compile killed): no workers are started for it (review 35 M1).
            if cancelled is not None and cancelled.is_set():
                raise EvaluationCancelled("stopped before its workers: its caller went away")
            prepared = self._start_workers(task, options, runtime, reference, key)
        workers.append(prepared.reference)
        ref_worker, cand_worker = prepared.reference, prepared.candidate
        # Finished (and its timing sets adopted into the store) as soon as it is done, beside the
        # candidate's compile: other evaluations of the task wait for those sets whatever this
        # candidate's compile does (a compile that fails or runs into its limit never gets further).
        ref_finished = _finish_reference_soon(
            ref_worker, reference_timeout_s(self.settings.run_timeout_s), cancelled
        )
        if cand_worker is not None:
            workers.append(cand_worker)
        compiled = compiling.result()
        seconds["compile"] = compiled.seconds
        if cancelled is not None and cancelled.is_set():
            raise EvaluationCancelled("stopped after its compile: its caller went away")
        check_deadline(deadline, "stopped after its compile")
        symbol = task.entry
        if compiled.ok and isinstance(task, KernelTask):
            found = kernel_symbol(compiled.kernels, task.entry)
            if found is None:
                compiled = compiled.model_copy(update={"ok": False})
                return self._compile_failure(
                    task, compiled, seconds, f"the cubin has no kernel named {task.entry!r}"
                )
            symbol = found
        if not compiled.ok:
            return self._compile_failure(task, compiled, seconds, None)
        if compiled.kind == "shared_library" and compiled.product:
            refused = _library_refusal(compiled.product)
            if refused:
                return self._compile_failure(
                    task, compiled.model_copy(update={"ok": False}), seconds, refused, refused_static=True
                )
        waited = time.perf_counter()
        ref_outcome = ref_finished.result()
        seconds["reference_wait"] = time.perf_counter() - waited
        seconds["reference"] = time.perf_counter() - ref_started
        if not ref_outcome.ok:
            return _reference_failure(task, Stage.CORRECTNESS, ref_outcome.message, compiled, seconds)
        if ref_outcome.reference_timing is not None:
            self._remember("reference", task, ref_outcome.reference_timing)
        seconds.update(
            {"reference_run" if k == "reference" else k: v for k, v in ref_outcome.seconds.items()}
        )
        if cand_worker is None:
            return Verdict(
                task_id=task.id,
                stage=Stage.COMPILE,
                passed=False,
                error=ErrorKind.RUNTIME_NOT_AVAILABLE,
                message="no GPU runtime on this executor: static checks and compilation passed and "
                "the reference ran on the CPU; correctness and timing were not run",
                compile=compiled,
                runtime_stages="not_run",
                reward=None,
                seconds=seconds,
                device="none",
            )
        applied = self.run_limit(task, options)
        run = CandidateRun(
            candidate_product=str(compiled.product),
            candidate_symbol=symbol,
            reference_timing=self._cached_timing("reference", task),
            call_limit=applied.call,
            release_gpu=self.settings.release_gpu_early,
            host_shared=self._host_shared(task, options, runtime),
        )
        waited = time.perf_counter()
        # The worker's inputs and uploads are done before the GPU is taken for the candidate.
        cand_worker.wait_prepared(self.settings.run_timeout_s, cancelled)
        seconds["prepare_wait"] = time.perf_counter() - waited
        kind: Kind = "kernel" if isinstance(task, KernelTask) else "function"
        if kind == "function":
            self.pass_host_gate(seconds, cancelled)
        check_deadline(deadline, "stopped before its GPU turn")
        waited = time.perf_counter()
        # The worker's checks after its GPU work, once it says so: the device's locks held for it, the
        # uploads' until it is stopped, the GPU's until it is gone.
        leftover: list[tuple[contextlib.ExitStack, contextlib.ExitStack]] = []
        with contextlib.ExitStack() as in_turn:
            turn = in_turn.enter_context(self.turns.turn(kind, cancelled))
            # the wait for the turn may have outlasted the deadline: the turn goes back unused
            check_deadline(deadline, "stopped at its GPU turn")
            teardown = in_turn.enter_context(contextlib.ExitStack())
            reaped = time.perf_counter()
            seconds["gpu_wait"] = reaped - waited
            if self.settings.gpu_kernel_first:
                # not seconds: how often this run was passed over, or whether it went ahead
                seconds["turn_skipped" if kind == "function" else "turn_ahead"] = float(
                    turn.skipped if kind == "function" else turn.ahead
                )
            if not isinstance(task, KernelTask):
                teardown.callback(self._hold_through_teardown(seconds).join)
            if self.settings.timings_at_turn:
                run = self._timings_now(task, run)
            # judged again at the turn, either way: its baseline timed (or gone stale) meanwhile
            run = run.model_copy(update={"host_shared": self._host_shared(task, options, runtime)})
            seconds["host_shared"] = float(run.host_shared)

            asked: list[float] = []  # when the release was first tried

            def release(within_s: float) -> bool:
                """End the turn while the worker checks on the host (Worker.release_gpu), the
                device's locks held shared for it: no other run's function trials begin while its
                process runs, whatever it does (a candidate can write the note itself). The uploads'
                lock goes once SIGKILL is sent (not waited for: a kernel's event-timed trials may begin
                during the teardown, as when a stopped worker ended its turn before), the GPU's once
                the process is gone, CUDA context included, or after RELEASED_GONE_S
                (:meth:`_let_go_when_gone`). Not an account of every process the candidate made: in the
                candidate process's mode, one the runner cloned is not waited for. The locks are
                tried for up to RELEASE_TRY_S in all (`hold_soon`: the requests that waited during the
                run pass their turnstiles first; ``release_hold_wait``), ``within_s`` (one tick of the
                worker's wait) per call, so that the wait's watch runs between; past RELEASE_TRY_S the
                turn is kept. Whether it is done: released, or kept."""
                if not asked:
                    asked.append(time.perf_counter())
                spent = time.perf_counter() - asked[0]
                held = hold_soon(
                    self.pool.gpu_lock, ("gpu", "uploads"), max(0.0, min(within_s, RELEASE_TRY_S - spent))
                )
                seconds["release_hold_wait"] = time.perf_counter() - asked[0]
                if held is None:  # something holds one alone: tried again, then the turn is kept
                    if seconds["release_hold_wait"] < RELEASE_TRY_S:
                        return False
                    seconds["release_refused"] = 1.0
                    return True
                gpu, uploads = held
                self._released_holds.begin()
                gpu.callback(self._released_holds.end)
                leftover.append((gpu, uploads))
                seconds["gpu_held"] = time.perf_counter() - reaped
                in_turn.close()
                return True

            try:
                outcome = finish_candidate(
                    cand_worker,
                    run,
                    self.settings.run_timeout_s,
                    limit,
                    run_limit_s=applied.seconds,
                    cancelled=cancelled,
                    on_release=release if kind == "function" and self.settings.release_gpu_early else None,
                    held_for_released=self._released_holds.seconds,
                    checks_s=post_release_checks_s(task, options),
                )
            finally:
                if leftover:  # the worker is stopped here (finish_candidate's wait ends with that)
                    leftover[0][1].close()
                    self._let_go_when_gone(cand_worker, leftover[0][0])
            if leftover:
                seconds["after_release"] = time.perf_counter() - reaped - seconds["gpu_held"]
            else:
                seconds["gpu_held"] = time.perf_counter() - reaped
        seconds.update(outcome.seconds)
        if cand_worker.credited_s > 0:  # the run limit's end moved on by the holds for released workers
            seconds["released_hold_credit"] = cand_worker.credited_s
        if cand_worker.release_allowance_s > 0:  # its deadline after the release, before any credit
            seconds["release_allowance"] = cand_worker.release_allowance_s
        if cand_worker.release_lock_credit_s > 0:  # its checks' wait for the host memory's lock
            seconds["released_lock_credit"] = cand_worker.release_lock_credit_s
        # Not self.device from the outcome: it picks the host's store of baseline timings, and that
        # process ran the candidate's code. The peak worker, which runs none, names it.
        self._know_device(runtime)
        if outcome.killed_by is not None:
            applied = applied.model_copy(update={"stopped_by": outcome.killed_by})
        if outcome.error is ErrorKind.REFERENCE_ERROR:
            return _reference_failure(task, Stage.CORRECTNESS, outcome.message, compiled, seconds)
        speedup = baseline_speedup = baseline_timing = None
        cand = outcome.candidate_timing
        # The serial reference's timing is the evaluator's own (a reference worker's), never what the
        # candidate's worker reports: that process ran the candidate's code, which could rewrite it
        # (review 22: one candidate set every later candidate's speedup of its task).
        reference_timing = run.reference_timing
        if outcome.passed and cand is not None and cand.median_ms > 0:
            if reference_timing is None:  # not known when the run began: a reference worker times it
                self._prepare_task(task, options)
                reference_timing = self._cached_timing("reference", task)
            if reference_timing is not None:
                speedup = reference_timing.median_ms / cand.median_ms
            # Never a baseline timed in the candidate's process (its worker times none): the clean one.
            baseline_timing = same_host_memory(
                self._baseline_timing(task, options, runtime, measuring, seconds, cancelled, kept_baseline),
                seconds,
            )
            if baseline_timing is not None:
                baseline_speedup = baseline_timing.median_ms / cand.median_ms
        # A pass is built only for an evaluation still wanted: one that the service's stop (or its caller)
        # ended meanwhile may lack what the stop cut short (an inline preparation's reference timing, a
        # baseline stopped in the same wait) and is never a judged pass (review 30 F3).
        if outcome.passed:
            for event, why in (
                (cancelled, "its caller went away"),
                (self._closing, "the executor is stopping"),
            ):
                if event is not None and event.is_set():
                    raise EvaluationCancelled(f"stopped before its verdict: {why}")
        # Correct but not timed (run_timing=False) gives no speedup: reward stays None, not -1.
        reward = reward_for(outcome.passed, speedup) if (speedup is not None or not outcome.passed) else None
        return Verdict(
            task_id=task.id,
            stage=Stage(outcome.stage),
            passed=outcome.passed,
            error=outcome.error,
            message=outcome.message,
            runtime_stages="run",
            compile=compiled,
            mismatch=outcome.mismatch,
            input_sets_checked=outcome.input_sets_checked,
            candidate_timing=cand,
            reference_timing=reference_timing,
            baseline_timing=baseline_timing,
            speedup=speedup,
            baseline_speedup=baseline_speedup,
            reward=reward,
            device=outcome.device or None,
            seconds=seconds,
            run_limit=applied,
            floor=outcome.floor,
        )

    def _hold_through_teardown(self, seconds: dict[str, float]) -> threading.Thread:
        """Workers of earlier evaluations may still be in teardown (their CUDA context too): a
        function task's host-timed trials wait for that, not its untimed checks. So the GPU lock is
        held shared from here until they are gone (at most 10 s), in a thread; the candidate's checks
        share it, its trials, which hold it alone, wait (``reap_wait``: how long that took). A
        kernel's event-timed trials do not see other processes' teardown (executor.gpulock)."""
        started = time.perf_counter()
        held = contextlib.ExitStack()
        held.enter_context(hold(self.pool.gpu_lock, "shared"))

        def drain_then_let_go() -> None:
            try:
                if not self.pool.drain(timeout_s=10.0):
                    logger.warning("a finished worker is still being torn down; timing anyway")
            finally:
                seconds["reap_wait"] = time.perf_counter() - started
                held.close()

        thread = threading.Thread(target=drain_then_let_go, name="executor-teardown", daemon=True)
        thread.start()
        return thread

    def pass_host_gate(self, seconds: dict[str, float], cancelled: threading.Event | None = None) -> None:
        """Before a function run asks for its turn (``host_gate_before_turn``): wait until the host
        memory's lock could be had shared, and let it go at once (``host_gate_wait``).

        Issue 29's stall: a function run's worker takes that lock (the host's, shared by every GPU's
        runs) for its checks and trials; while another GPU's trials held it alone, the run waited for it
        holding this GPU's turn (0.58 s per correct function candidate with two replicas). Waiting here
        lets this GPU's turn go to others meanwhile. Holding it through the wait for the turn could
        deadlock with this GPU's run in its turn, whose trials take it alone after their turn.

        The wait tries the lock without blocking every :data:`HOST_GATE_POLL_S` (so it keeps no
        turnstile meanwhile), raises :class:`EvaluationCancelled` once ``cancelled`` or the evaluator's
        closing is set, and gives up after ``run_timeout_s`` (``host_gate_gave_up``): the run then goes
        on without the pass, as with the setting off."""
        if not self.settings.host_gate_before_turn:
            return
        gated = time.perf_counter()
        try:
            while True:
                held = hold_now(self.pool.gpu_lock, ("host",))
                if held is not None:
                    held.close()
                    return
                for event in (cancelled, self._closing):
                    if event is not None and event.is_set():
                        raise EvaluationCancelled("stopped before its GPU turn: its caller went away")
                if time.perf_counter() - gated >= self.settings.run_timeout_s:
                    seconds["host_gate_gave_up"] = 1.0
                    logger.warning("the host memory's lock stayed held; going on without the pass")
                    return
                time.sleep(HOST_GATE_POLL_S)
        finally:
            seconds["host_gate_wait"] = time.perf_counter() - gated

    @contextlib.contextmanager
    def _baseline_turn(self, urgent: bool) -> Iterator[Turn]:
        """A naive baseline's turn, taken as a function candidate's run's is: after the pass through the
        host memory's lock (:meth:`pass_host_gate`), since its worker takes the trials' locks too."""
        self.pass_host_gate({})
        with self.turns.turn("function", self._closing, urgent=urgent, holder="baseline") as turn:
            yield turn

    @staticmethod
    def _let_go_when_gone(worker: WorkerProcess, held: contextlib.ExitStack) -> None:
        """Let ``held`` go once ``worker`` (stopped) is gone, in a thread: its process, its threads
        and its CUDA context with it; after :data:`RELEASED_GONE_S` at most (a process stuck in the
        driver's teardown, say), logged. When no thread can start, the worker is stopped and ``held``
        let go at once."""

        def wait_then_let_go() -> None:
            try:
                if not worker.kill(timeout_s=RELEASED_GONE_S):
                    logger.warning(
                        "a released worker was not gone after %.0fs; its device locks are let go",
                        RELEASED_GONE_S,
                    )
            except Exception:  # its locks are let go whatever happened
                logger.warning("could not wait for a released worker to be gone", exc_info=True)
            finally:
                held.close()

        try:
            threading.Thread(target=wait_then_let_go, name="executor-released", daemon=True).start()
        except RuntimeError:  # "can't start new thread"
            logger.warning("no thread to wait for a released worker; its device locks are let go now")
            try:
                worker.stop()
            finally:
                held.close()

    def _host_shared(self, task: FunctionTask | KernelTask, options: EvaluationOptions, runtime: str) -> bool:
        """Whether a function task's trials (a candidate's or its naive baseline's) may hold the host
        memory's lock shared (:func:`executor.gpulock.compute_bound`): its arrays at the timing size
        over its naive baseline's median as kept (this evaluator's, or the host's store) move under the
        threshold. Only the baseline's median decides, never a candidate's: a candidate made slow on
        purpose would get a copy-bound task judged compute-bound, and its task's later trials (the
        baseline's own too, kept host-wide) timed beside other traffic. No baseline kept (a task's
        first evaluation, its baseline's own run, a task without a baseline): alone."""
        if not isinstance(task, FunctionTask) or runtime == "none":
            return False
        if not self.wants_baseline(task, options, runtime):
            return False
        baseline = self._cached_timing("baseline", task, options)
        return compute_bound(task_bytes(task), None if baseline is None else baseline.median_ms)

    def _timings_now(self, task: FunctionTask | KernelTask, run: CandidateRun) -> CandidateRun:
        """``run`` with the task's serial reference timing as cached now, when its turn has come
        (``timings_at_turn``): a candidate that waited for the GPU while another of its task timed it
        takes that result instead of timing it again under the lock (a timing the run has is kept).
        The naive baseline is never timed in a candidate's run (:mod:`executor.baseline`)."""
        if run.reference_timing is None and (reference := self._cached_timing("reference", task)):
            return run.model_copy(update={"reference_timing": reference})
        return run

    def run_limit(self, task: FunctionTask | KernelTask, options: EvaluationOptions) -> RunLimit:
        """The limit of a candidate's run and of each of its calls (:mod:`executor.runlimit`): from
        the parent's time when the caller gives it, else the serial reference's once the task's
        reference was timed."""
        reference = self._cached_timing("reference", task)
        timing_budget = options.max_warmup_ms / 1e3 + options.max_timing_s if options.run_timing else 0.0
        # A function task's repeat-visit rule may make up to REPEAT_CONFIRM_CALLS confirming calls after
        # the trials, each in a fresh runner (started, loaded, warmed up): with three, the GPU corpus's
        # value memo ran past a 5.9-s limit (session 40's call 3) where one had fitted.
        confirming = options.run_timing and options.repeat_confirm and isinstance(task, FunctionTask)
        return run_limit(
            cap_s=self.settings.run_timeout_s,
            floor_s=self.settings.run_limit_floor_s,
            factor=self.settings.run_limit_factor,
            # the fresh sets, the timing-size checks, the first set again, the reference's repeats
            calls=options.correctness_sets
            + options.timing_size_checks
            + 1
            + options.reference_repeats
            + (REPEAT_CONFIRM_CALLS if confirming else 0),
            timing_budget_s=timing_budget,
            reference_ms=reference.median_ms if reference is not None else None,
            parent_ms=options.parent_ms,
            call_floor_s=self.settings.run_call_floor_s,
            confirm_s=REPEAT_CONFIRM_CALLS * CONFIRMING_PROCESS_S if confirming else 0.0,
        )

    def with_settings(self, options: EvaluationOptions | None) -> EvaluationOptions:
        """``options`` (the defaults when None) with this executor's settings where the caller left
        them to it (None): ``host_memory``."""
        options = options or EvaluationOptions()
        if options.host_memory is not None:
            return options
        return options.model_copy(update={"host_memory": self.settings.host_memory})

    def prepare_task(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions | None = None
    ) -> Future[None] | None:
        """Start, in the background, what a task's first evaluation needs before its candidate can run
        and that no candidate changes: the reference's build, the task's timing set (stored once) and
        the serial reference's timing. A caller that knows a task's candidates are coming (the fleet's
        router, when one is queued) calls this so that the work overlaps other candidates' GPU time
        instead of delaying the first candidate. Returns the work's future (None: nothing to do, or it
        is already under way or done); an evaluation of the task that starts meanwhile waits for it."""
        options = self.with_settings(options)
        key = self._key("reference", task)
        with self._prepare_lock:
            if key in self._tasks_preparing or (
                self._cached_timing("reference", task) is not None
                and not self._baseline_unknown(task, options)
            ):
                return None
            try:
                future = self._task_threads.submit(self._prepare_ahead, task, options)
            except RuntimeError:  # closed
                return None
            self._tasks_preparing[key] = future
        return future

    def task_preparation(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions | None = None
    ) -> tuple[bool, BaselineState]:
        """How far ``task``'s preparation ahead is, without starting anything (``POST /v1/prepare``
        with ``wait_s``): whether it is done (its :meth:`prepare_task` finished, or nothing was left
        to do), and its naive baseline's state: ``not_wanted`` (its verdicts carry none), ``kept``
        (timed, in memory or the host's store), ``measuring``, ``failed`` (the measurement ended with
        no timing, or, for page-locked memory, with one timed on pageable arrays, which is not kept) or
        ``none`` (wanted, neither kept nor being measured)."""
        options = self.with_settings(options)
        with self._prepare_lock:
            ahead = self._tasks_preparing.get(self._key("reference", task))
        if ahead is not None and not (ahead.done() and self._closing.is_set()):
            done = ahead.done()
        else:  # never prepared here, or stopped: done only when prepare_task would find nothing to do
            done = self._cached_timing("reference", task) is not None and not self._baseline_unknown(
                task, options
            )
        if not self.wants_baseline(task, options, self._task_runtime(task)):
            return done, "not_wanted"
        with self._baseline_lock:
            known = self._baseline_runs.get(baseline_key(task, options))
        if known is not None and not known[0].done():
            return done, "measuring"
        if self._cached_timing("baseline", task, options) is not None:
            return done, "kept"
        return done, "failed" if known is not None else "none"

    def _prepare_ahead(self, task: FunctionTask | KernelTask, options: EvaluationOptions) -> None:
        """:meth:`_prepare_task` for :meth:`prepare_task`. Ended by the stop (:meth:`stop_preparations`),
        it leaves no entry in the tasks being prepared: :meth:`task_preparation` then says done only for
        what is kept (a stopped preparation was reported ready, review 30 F5), and the task can be
        prepared again."""
        try:
            self._prepare_task(task, options)
        finally:
            if self._closing.is_set():
                with self._prepare_lock:
                    self._tasks_preparing.pop(self._key("reference", task), None)

    def _prepare_task(self, task: FunctionTask | KernelTask, options: EvaluationOptions) -> None:
        # Stopped with the service (stop_preparations): the reference's build and its worker are
        # killed, nothing half-made is kept (both stores take only whole entries, by renames).
        try:
            reference = build_reference(task, self.settings.cache_dir, stop=self._closing)
        except ReferenceBuildError as e:  # the evaluation reports it, as a reference_error verdict
            logger.warning("could not prepare %s: %s", task.id, e)
            return
        except EvaluationCancelled:
            logger.info("the preparation of %s was stopped: the executor is shutting down", task.id)
            return
        runtime = self._task_runtime(task)
        # The naive baseline too, in its own worker, when not known: the task's first candidate then
        # joins that measurement instead of starting it.
        self._measure_baseline(task, options, runtime, reference)
        if runtime == "none" or not options.run_timing or self._cached_timing("reference", task):
            return  # no timing set and no reference timing without a runtime (or known already)
        timing_set = self._timing_set(task, reference, options)
        worker = self.pool.take("reference")
        self.pool.replenish("reference")
        try:
            start_reference(
                worker,
                ReferenceJob(
                    task=task,
                    reference_library=str(reference),
                    seeds=[secrets.randbits(62) for _ in range(seeds_needed(options))],
                    options=options,
                    sets=0,  # no fresh sets: those are each evaluation's own
                    out_dir="",
                    time_reference=True,
                    timing_set=timing_set,
                ),
                self.settings.memory_limit_bytes,
            )
            outcome = finish_reference(
                worker, reference_timeout_s(self.settings.run_timeout_s), cancelled=self._closing
            )
        except ExecutorError as e:
            logger.warning("could not prepare %s: %s", task.id, e)
            return
        except EvaluationCancelled:
            logger.info("the preparation of %s was stopped: the executor is shutting down", task.id)
            return
        finally:
            self.pool.discard(worker)
        if not outcome.ok:
            logger.warning("the reference of %s failed while preparing it: %s", task.id, outcome.message)
        elif outcome.reference_timing is not None:
            self._remember("reference", task, outcome.reference_timing)
            logger.info("prepared %s in %s", task.id, {k: round(v, 3) for k, v in outcome.seconds.items()})

    def _task_runtime(self, task: FunctionTask | KernelTask) -> Literal["gpu", "host", "none"]:
        """Where ``task``'s candidates run on this executor (a kernel task needs a GPU)."""
        runtime = self.runtime if self.runtime_checks_available else "none"
        return "none" if runtime == "host" and isinstance(task, KernelTask) else runtime

    def _timing_set(
        self, task: FunctionTask | KernelTask, reference: Path, options: EvaluationOptions
    ) -> TimingSetSpec | None:
        """The task's timing set in the store, when its candidates are timed on it (``timing_inputs``)."""
        if options.timing_inputs != "task":
            return None
        return timing_set_spec(
            task, reference, self.timing_sets_dir, self.settings.timing_set_cache_bytes, self.timing_secret
        )

    def _baseline_unknown(self, task: FunctionTask | KernelTask, options: EvaluationOptions) -> bool:
        """Whether ``task``'s verdicts want a naive baseline that is neither kept nor being measured."""
        if not self.wants_baseline(task, options, self._task_runtime(task)):
            return False
        with self._baseline_lock:
            known = self._baseline_runs.get(baseline_key(task, options))
            if known is not None and not self._due_again(*known):
                return False
        return self._cached_timing("baseline", task, options) is None

    @staticmethod
    def _prepared_key(task: FunctionTask | KernelTask, options: EvaluationOptions, runtime: str) -> str:
        return content_key("prepared", runtime, task.model_dump_json(), options.model_dump_json())

    def _start_workers(
        self,
        task: FunctionTask | KernelTask,
        options: EvaluationOptions,
        runtime: Literal["gpu", "host", "none"],
        reference: Path,
        key: str,
        claim: bool = True,
    ) -> PreparedEvaluation:
        """Hand a reference worker and (with a runtime) a candidate worker their jobs for fresh seeds
        (``claim``: whether the reference job may claim its task's preparation, see
        :func:`start_reference`)."""
        limit = self.settings.memory_limit_bytes
        seeds = [secrets.randbits(62) for _ in range(seeds_needed(options))]
        time_reference = (
            runtime != "none" and options.run_timing and self._cached_timing("reference", task) is None
        )
        timing_set = (
            self._timing_set(task, reference, options) if runtime != "none" and options.run_timing else None
        )
        ref_worker = self.pool.take("reference")
        self.pool.replenish("reference")
        prepared = PreparedEvaluation(key=key, seeds=seeds, reference=ref_worker, candidate=None)
        try:
            start_reference(
                ref_worker,
                ReferenceJob(
                    task=task,
                    reference_library=str(reference),
                    seeds=seeds,
                    options=options,
                    sets=None if runtime != "none" else 1,
                    out_dir="",
                    time_reference=time_reference,
                    timing_set=timing_set,
                ),
                limit,
                claim=claim,
            )
            if runtime != "none":
                prepared.candidate = self.pool.take("candidate")
                # The next spare starts at once: its imports overlap this evaluation, and its CUDA
                # context waits for the GPU lock (executor.gpulock), never for another's trials.
                self.pool.replenish("candidate")
                start_candidate(
                    prepared.candidate,
                    WorkerJob(
                        task=task,
                        runtime=runtime,
                        reference_library=str(reference),
                        seeds=seeds,
                        options=options,
                        expected_dir=str(ref_worker.dir / "expected"),
                        timing_set=timing_set,
                        compare_product=self._comparison_product() if isinstance(task, KernelTask) else None,
                        device_peak=device_peak(self.pool, self.settings.cache_dir),
                        host_lock_max_bytes=self.lock_cap(),
                    ),
                    limit,
                )
        except BaseException:
            prepared.close()
            raise
        return prepared

    def _prepare_next(
        self,
        task: FunctionTask | KernelTask,
        options: EvaluationOptions,
        runtime: Literal["gpu", "host", "none"],
    ) -> None:
        """Start the workers for another candidate of the same task, so that its inputs and expected
        outputs are ready by the time it is compiled. Runs after the GPU work of this evaluation, so
        the reference's CPU work never overlaps the trials of the candidate just timed. Also keeps
        the stored timing sets under their size limit (never this task's)."""
        try:
            reference = build_reference(task, self.settings.cache_dir)
            # A prepared pair may wait long for its candidate, and its reference is adopted only then:
            # it does not hold the task's claim meanwhile (it waits for a holder, or prepares alone).
            prepared = self._start_workers(
                task, options, runtime, reference, self._prepared_key(task, options, runtime), claim=False
            )
        except ExecutorError as e:
            logger.warning("could not prepare the next evaluation of %s: %s", task.id, e)
            return
        self.pool.keep_prepared(prepared)
        keep = {
            Path(v.dir).name
            for v in timing_set_variants(
                timing_set_spec(task, reference, self.timing_sets_dir, secret=self.timing_secret), 8
            )
        }
        try:
            prune_timing_sets(self.timing_sets_dir, self.settings.timing_set_cache_bytes, keep)
        except OSError as e:
            logger.warning("could not prune the timing sets: %s", e)

    def _compile_failure(
        self,
        task: FunctionTask | KernelTask,
        compiled: CompileResult,
        seconds: dict[str, float],
        message: str | None,
        refused_static: bool = False,
    ) -> Verdict:
        kind = ErrorKind.COMPILE_TIMEOUT if compiled.timed_out else ErrorKind.COMPILE_ERROR
        text = message or (compiled.log.strip().splitlines() or ["compilation failed"])[0]
        # what the preprocessor read, or what the library imports: a static rule
        refused = refused_static or compiled.log.startswith(INCLUDE_REFUSED)
        return Verdict(
            task_id=task.id,
            stage=Stage.STATIC if refused else Stage.COMPILE,
            passed=False,
            error=ErrorKind.STATIC_REJECTED if refused else kind,
            message=text,
            compile=compiled,
            reward=-1.0,
            seconds=seconds,
        )

    def _build_comparison(self) -> str | None:
        result = self.compiler.compile_source(compare_source(), "cubin")
        if not result.ok:
            logger.warning(
                "the comparison kernels do not compile; outputs are compared on the host:\n%s", result.log
            )
            return None
        return result.product

    def _comparison_product(self) -> str | None:
        """The cubin of the comparison kernels; None where there is none (no GPU, or it failed)."""
        if self._comparison is None:
            return None
        try:
            return self._comparison.result()
        except (ExecutorError, CancelledError) as e:
            logger.warning("no comparison kernels; outputs are compared on the host: %s", e)
            return None

    def wants_baseline(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions, runtime: str
    ) -> bool:
        """Whether ``task``'s verdicts carry a baseline speedup: a function task with a ``naive.cu``,
        timed with ``options.baseline``, on the GPU (or, with ``host_baseline``, the test-only host
        runtime)."""
        return (
            options.run_timing
            and options.baseline
            and isinstance(task, FunctionTask)
            and bool(task.naive_source)
            and (runtime == "gpu" or (runtime == "host" and self.settings.host_baseline))
        )

    def _measure_baseline(
        self,
        task: FunctionTask | KernelTask,
        options: EvaluationOptions,
        runtime: Literal["gpu", "host", "none"],
        reference: Path,
    ) -> tuple[Future[BaselineOutcome], bool] | None:
        """The measurement of ``task``'s naive baseline in a worker of its own (:mod:`executor.baseline`)
        and whether it was started here: queued now (at most the setting ``baseline_workers`` run at once) unless
        its timing is known or wanted by none (then None), or already under way (then that one; one that
        failed is tried again after ``RETRY_AFTER_S``, unless its naive.cu does not compile; one whose
        timing went stale after ``baseline_timing_max_age_s``, as well)."""
        if not self.wants_baseline(task, options, runtime):
            return None
        self._know_device(runtime)
        if self._cached_timing("baseline", task, options):
            return None
        key = baseline_key(task, options)
        future: Future[BaselineOutcome] = Future()
        with self._baseline_lock:
            if self._closing.is_set():
                return None
            known = self._baseline_runs.get(key)
            if known is not None and not self._due_again(*known):
                return known[0], False
            # a retry after a failure waits its turn as the candidates' runs do (it may fail again,
            # holding the GPU up to the run limit); a first or a stale timing's measurement is urgent
            urgent = known is None or (known[0].result().ok and not lacks_page_locks(known[0].result()))
            self._baseline_runs[key] = (future, time.monotonic())
        job = WorkerJob(
            task=task,
            runtime=runtime,
            reference_library=str(reference),
            seeds=[secrets.randbits(62) for _ in range(seeds_needed(options))],
            options=options,
            timing_set=self._timing_set(task, reference, options),
            # its copies made while naive.cu compiles, off the trials' lock (else in its run)
            baseline_copies=self.settings.baseline_copies_ahead,
            host_lock_max_bytes=self.lock_cap(),
        )

        def measure() -> None:
            outcome = BaselineOutcome(ok=False, message="the baseline's measurement stopped unexpectedly")
            try:
                if self._closing.is_set():  # queued behind others while the executor closed
                    outcome = BaselineOutcome(ok=False, message="the executor closed")
                    return
                with self._baseline_claim(key) as claim_wait:
                    # timed by another executor of the host while this one waited for its claim
                    stored = self._kept_baseline(task, options)
                    if stored is not None:
                        outcome = BaselineOutcome(
                            ok=True,
                            message="timed by another executor of the host",
                            timing=stored[0],
                            device=self.device or "",
                            # the host memory its trials ran on, as the key it was kept under says
                            seconds={"baseline_claim_wait": claim_wait} | _memory_seconds(stored[1]),
                        )
                        return
                    outcome = baseline_worker.measure(
                        self.pool,
                        job,
                        lambda: self._naive_product(task),
                        self.settings.run_timeout_s,
                        self.settings.memory_limit_bytes,
                        self._closing,
                        # its run takes the GPU's turn as a function candidate's does: without it, its
                        # trials' locks and a kernel run's, taken in the other order, deadlock. It goes
                        # before the runs waiting: verdicts whose candidates have run wait for it.
                        turn=lambda: self._baseline_turn(urgent),
                        host_shared=lambda: self._host_shared(task, options, runtime),
                    )
                    outcome.seconds["baseline_claim_wait"] = claim_wait
                    if outcome.ok and outcome.timing is not None:
                        self._keep_baseline(task, options, outcome)  # stored before the claim goes
                    else:
                        logger.warning("no baseline timing for %s: %s", task.id, outcome.message)
            except InterruptedError:  # the executor closed while another executor's claim was held
                outcome = BaselineOutcome(ok=False, message="the executor closed")
            finally:  # whatever happened, the verdicts waiting for it go on
                future.set_result(outcome)

        try:
            self._baseline_threads.submit(measure)
        except RuntimeError:  # closed meanwhile
            with self._baseline_lock:
                self._baseline_runs.pop(key, None)
            return None
        return future, True

    @contextlib.contextmanager
    def _baseline_claim(self, key: str) -> Iterator[float]:
        """The host's claim on timing the baseline ``key`` on this evaluator's device model
        (:meth:`BaselineTimings.claim`: one executor of the host times it, the others wait, then read
        what it stored; a waiter gives up after ``run_timeout_s`` and times it itself); none without
        the store."""
        if self._baselines is None:
            yield 0.0
            return
        # a live holder is done within one worker's limit; past it, it is stuck: time it here
        with self._baselines.claim(
            key, self.device or "", self._closing, max_wait_s=self.settings.run_timeout_s
        ) as waited:
            yield waited

    def _due_again(self, running: Future[BaselineOutcome], started: float) -> bool:
        """Whether a baseline measurement started at ``started`` (``time.monotonic()``) is to be made
        again: done, and its timing gone stale (``baseline_timing_max_age_s``: it is no longer kept), or
        failed at least ``RETRY_AFTER_S`` ago (one of a naive.cu that does not compile never: its
        compile cache would say the same)."""
        if not running.done():
            return False
        age, outcome = time.monotonic() - started, running.result()
        if outcome.ok and not lacks_page_locks(outcome):
            return age >= self.settings.baseline_timing_max_age_s
        if outcome.ok:  # page-locked memory asked, pageable had: not kept, tried again as a failure is
            return age >= baseline_worker.RETRY_AFTER_S
        return outcome.message != baseline_worker.NOT_BUILT and age >= baseline_worker.RETRY_AFTER_S

    def _know_device(self, runtime: str) -> None:
        """Learn this evaluator's device model before its first run, from the device's figures (measured
        once per process by a worker of their own, :mod:`executor.peak`, which the first candidate needs
        anyway), so that the host's stored baseline timings are found from the start: after a restart,
        a task prepared before the first verdict no longer times its baseline again."""
        if self.device is not None or self._baselines is None or runtime != self.pool.runtime:
            return
        model = device_peak(self.pool, self.settings.cache_dir).model
        if model and self.device is None:
            self.device = model

    def _naive_product(self, task: FunctionTask | KernelTask) -> str | None:
        """The build of the task's ``naive.cu`` (from the compile cache after the first); None when it
        does not compile."""
        try:
            result = self.compiler.compile(task, task.naive_source or "")
        except ExecutorError as e:
            logger.warning("naive.cu of %s could not be built; no baseline speedup: %s", task.id, e)
            return None
        if not result.ok or not result.product:
            logger.warning("naive.cu of %s does not compile; no baseline speedup", task.id)
            return None
        return str(result.product)

    def _baseline_timing(
        self,
        task: FunctionTask | KernelTask,
        options: EvaluationOptions,
        runtime: str,
        measuring: tuple[Future[BaselineOutcome], bool] | None,
        seconds: dict[str, float],
        cancelled: threading.Event | None,
        kept: tuple[TimingStats, float | None] | None = None,
    ) -> TimingStats | None:
        """The naive baseline's timing for a timed candidate's verdict: the result of the measurement
        this evaluation started or joined (``measuring``: its future, and whether it was started here),
        waited for; else as kept (memory, or the host's store), or ``kept`` (as kept when the evaluation
        began) when that has gone stale meanwhile."""
        if not self.wants_baseline(task, options, runtime):
            return None
        # not seconds: the host memory its trials ran on, with page-locked memory asked (same_host_memory)
        memory = "baseline_host_page_locked" if options.host_memory == "page_locked" else None
        if measuring is None:
            kept = self._kept_baseline(task, options) or kept
            if kept is None:
                return None
            if memory is not None and kept[1] is not None:  # as the key it was kept under says
                seconds[memory] = kept[1]
            return kept[0]
        waited = time.perf_counter()
        while True:
            try:
                outcome = measuring[0].result(timeout=0.05)
                break
            except FutureTimeout:
                if cancelled is not None and cancelled.is_set():
                    raise EvaluationCancelled(
                        "stopped waiting for the baseline: its caller went away"
                    ) from None
        seconds["baseline_wait"] = time.perf_counter() - waited
        if measuring[1]:
            # the baseline's trials, once per task (in its own worker: not under this run's turn), and
            # the wait for another executor of the host timing it
            for part in ("baseline_timing", "baseline_claim_wait"):
                if part in outcome.seconds:
                    seconds[part] = outcome.seconds[part]
            if "host_shared" in outcome.seconds:  # not seconds: how its trials held the host memory
                seconds["baseline_host_shared"] = outcome.seconds["host_shared"]
        found: TimingStats | None
        locked: float | None
        if outcome.ok:  # what this measurement's (or a join's) trials ran on
            found, locked = outcome.timing, outcome.seconds.get("host_page_locked", 0.0)
        else:
            kept = self._kept_baseline(task, options)
            found, locked = (None, None) if kept is None else kept
        if memory is not None and found is not None and locked is not None:
            seconds[memory] = locked
        return found

    def _keep_baseline(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions, outcome: BaselineOutcome
    ) -> None:
        """Keep a baseline worker's timing (the only baseline timing kept): in memory, and for the host's
        other executors under its device's model (which this evaluator learns here if it did not know
        it). Not one timed pageable for a request of page-locked memory because its locks failed (the
        driver, the rlimit, no context ahead, or unlocked during its trials): it would be every later
        page-locked candidate's denominator (:func:`lacks_page_locks`). One left pageable by the cap
        (``host_lock_over_cap``, which its task passes on every measurement under this executor's
        cap) is kept under a key of its own (:func:`executor.basetiming.baseline_key`'s ``over_cap``),
        which says it ran pageable (:meth:`_kept_baseline`): measured again every 300 s, it took a
        GPU turn each time and was never kept (review 44 F3)."""
        assert outcome.timing is not None
        if lacks_page_locks(outcome):
            logger.warning(
                "the naive baseline of %s was timed on pageable memory (host_lock_failed), not kept "
                "for page_locked; tried again after %.0f s",
                task.id,
                baseline_worker.RETRY_AFTER_S,
            )
            return
        over_cap = self._over_cap_key(options, outcome.seconds.get("host_page_locked") == 0.0)
        with self._cache_lock:
            key = _baseline_memory(task, options, over_cap)
            self._timing_cache[key] = outcome.timing
            self._baseline_stale_at[key] = time.monotonic() + self.settings.baseline_timing_max_age_s
        if self.device is None and outcome.device:
            self.device = outcome.device
        if self._baselines is not None and outcome.device:
            self._baselines.save(
                outcome.device, baseline_key(task, options, over_cap), outcome.timing, seconds=outcome.seconds
            )

    def _over_cap_key(self, options: EvaluationOptions, pageable: bool) -> int | None:
        """The cap that names the key of a page-locked request's baseline timed pageable past it (this
        executor's ``host_lock_max_mb``, the cap its baseline workers get); None for the others."""
        return self.lock_cap() if options.host_memory == "page_locked" and pageable else None

    def lock_cap(self) -> int:
        """The most bytes of timed arrays that this executor's workers lock (``host_memory:
        page_locked``; each job names it): the setting ``host_lock_max_mb`` and, on the host runtime
        (``mlock``), no more than the soft RLIMIT_MEMLOCK that its workers inherit. A refusal by that
        limit recurs on every measurement, so it is made the cap's outcome, one that a baseline keeps
        (pageable, under this cap's key), rather than a failed lock retried every 300 s (review 45 F6).
        A GPU's registrations are bounded by no rlimit."""
        cap = self.settings.host_lock_max_mb << 20
        if self.runtime == "host":
            soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
            if soft != resource.RLIM_INFINITY:
                cap = min(cap, soft)
        return cap

    def _fits_cap(self, seconds: dict[str, float]) -> bool:
        """Whether a page-locked baseline that another executor of the host stored (its worker's
        ``seconds``) is one this executor's candidates can be compared with: the bytes its cap was
        applied to (``host_lock_total_bytes``, the same total as theirs) within this executor's cap
        (:meth:`lock_cap`), so that they are locked too. Past it, they are pageable past the cap:
        this executor reads, or measures, its own over-cap baseline (review 45 F2: one with a smaller
        cap read a larger cap's locked baseline, and none of its candidates got a baseline speedup).
        One stored without that total (before it was recorded) is not used."""
        total = seconds.get("host_lock_total_bytes")
        return total is not None and 0 <= total <= self.lock_cap()

    def _kept_baseline(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions
    ) -> tuple[TimingStats, float | None] | None:
        """The naive baseline's timing as kept (:meth:`_cached_timing`) and, with page-locked memory
        asked, the host memory its trials ran on (``host_page_locked``: 1.0 under the page_locked key,
        every array locked, under this executor's cap (:meth:`_fits_cap`); 0.0 under the key of this
        executor's cap, every array pageable past it; None with pageable memory asked). None when none
        is kept."""
        if options.host_memory != "page_locked":
            found = self._kept_under(task, options, None)
            return None if found is None else (found, None)
        for pageable, locked in ((False, 1.0), (True, 0.0)):
            found = self._kept_under(task, options, self._over_cap_key(options, pageable))
            if found is not None:
                return found, locked
        return None

    def _key(self, what: str, task: FunctionTask | KernelTask) -> tuple[str, str]:
        source = task.reference_source if what == "reference" else (task.naive_source or "")
        return what, f"{task.id}:{hash((source, task.model_dump_json(include={'params', 'args'})))}"

    def _cached_timing(
        self, what: str, task: FunctionTask | KernelTask, options: EvaluationOptions | None = None
    ) -> TimingStats | None:
        """The task's timing in this evaluator's memory; for a baseline with ``options``, else the one
        the host's executors stored for this device's model (executor.basetiming), if not stale."""
        if what == "baseline" and options is not None:
            kept = self._kept_baseline(task, options)
            return None if kept is None else kept[0]
        with self._cache_lock:
            return self._timing_cache.get(self._key(what, task))

    def _kept_under(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions, over_cap: int | None
    ) -> TimingStats | None:
        """The baseline timing kept under ``baseline_key(task, options, over_cap)``: in this evaluator's
        memory, else the one the host's executors stored for this device's model, if not stale."""
        key = _baseline_memory(task, options, over_cap)
        now = time.monotonic()
        with self._cache_lock:
            known = self._timing_cache.get(key)
            if known is not None and now >= self._baseline_stale_at.get(key, math.inf):
                del self._timing_cache[key], self._baseline_stale_at[key]
                known = None
        if known is not None:
            return known
        if self._baselines is None or self.device is None:
            return None
        stored = self._baselines.load_kept(self.device, baseline_key(task, options, over_cap))
        if stored is None:
            return None
        timing, age, seconds = stored
        if options.host_memory == "page_locked" and over_cap is None and not self._fits_cap(seconds):
            return None
        with self._cache_lock:
            if key not in self._timing_cache:
                self._timing_cache[key] = timing
                self._baseline_stale_at[key] = now + self.settings.baseline_timing_max_age_s - age
        return timing

    def _remember(
        self, what: Literal["reference"], task: FunctionTask | KernelTask, stats: TimingStats
    ) -> None:
        """Keep the serial reference's timing ``stats`` in memory (a baseline's: :meth:`_keep_baseline`)."""
        with self._cache_lock:
            self._timing_cache[self._key(what, task)] = stats


class _HeldTime:
    """A running count of the seconds during which at least one hold was open (:meth:`begin` and
    :meth:`end` pair up), read at any time with :meth:`seconds`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._since = 0.0
        self._total = 0.0

    def begin(self) -> None:
        with self._lock:
            if self._open == 0:
                self._since = time.monotonic()
            self._open += 1

    def end(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                self._total += time.monotonic() - self._since

    def seconds(self) -> float:
        with self._lock:
            return self._total + (time.monotonic() - self._since if self._open else 0.0)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Count the time of the ``with`` block."""
        self.begin()
        try:
            yield
        finally:
            self.end()


def task_bytes(task: FunctionTask | KernelTask) -> int:
    """The bytes of a function task's arrays at the timing size: what each of its calls copies between
    host memory and the GPU (inputs in, outputs out); 0 when a size cannot be worked out."""
    try:
        return sum(
            task.array_length(arg, "timing") * np.dtype(NUMPY_DTYPES[arg.dtype]).itemsize
            for arg in task.arrays
        )
    except (ExecutorError, KeyError, ValueError, TypeError):
        return 0


# The host rate (GB/s) at which the post-release allowance counts a function candidate's host checks
# (post_release_checks_s): 5x below the slowest seen for tasks of 10 MB or more on two H200 replicas
# (1.3 GB/s, mandelbrot_q28_i32's 100 MB in 79 ms; session 26, call 5), so a loaded host is covered.
CHECKS_HOST_GBPS = 0.25


def post_release_checks_s(task: FunctionTask | KernelTask, options: EvaluationOptions) -> float:
    """What a function candidate's host checks after its GPU release may take (executor.sandbox's
    allowance after the release): every host copy the trials used (at most a whole number of rounds
    through the timing sets, executor.worker.host.host_copy_count), the warm-up's and a confirming
    call's, each read twice (its arrays against the set's or the reference's), at
    :data:`CHECKS_HOST_GBPS`. 0 for a kernel task (nothing released)."""
    if not isinstance(task, FunctionTask):
        return 0.0
    sets = max(options.timing_sets, 1)
    rotate = options.host_rotate_buffers or options.rotate_buffers
    copies = -(-max(rotate, sets) // sets) * sets + 2
    return copies * 2 * task_bytes(task) / (CHECKS_HOST_GBPS * 1e9)


def lacks_page_locks(outcome: BaselineOutcome) -> bool:
    """Whether a baseline worker was asked for page-locked arrays (``host_memory: page_locked``) and
    timed on pageable ones because a lock failed (its ``host_page_locked`` is 0.0 when any of them
    could not be locked, or was unlocked during the trials), not because they passed the cap on locked
    bytes (``host_lock_over_cap``: its task does so on every measurement; kept, marked pageable)."""
    return outcome.seconds.get("host_page_locked") == 0.0 and not outcome.seconds.get("host_lock_over_cap")


def _memory_seconds(locked: float | None) -> dict[str, float]:
    """A kept baseline's host memory (:meth:`Evaluator._kept_baseline`) as its worker's seconds say it."""
    if locked is None:
        return {}
    return {"host_page_locked": locked} | ({"host_lock_over_cap": 1.0} if locked == 0.0 else {})


def same_host_memory(baseline: TimingStats | None, seconds: dict[str, float]) -> TimingStats | None:
    """``baseline`` for a verdict whose ``seconds`` hold its candidate's ``host_page_locked`` and its
    baseline's ``baseline_host_page_locked`` (both absent with pageable memory asked): None, with
    ``baseline_host_memory_differs`` in ``seconds``, when one was timed on page-locked arrays and the
    other on pageable ones (a lock failed on one side: the driver, the cap, no context ahead), whose
    copies run at different rates: no baseline speedup then, rather than one that compares the two."""
    if baseline is None:
        return None
    if seconds.get("host_page_locked", 0.0) != seconds.get("baseline_host_page_locked", 0.0):
        seconds["baseline_host_memory_differs"] = 1.0
        return None
    return baseline


def _baseline_memory(
    task: FunctionTask | KernelTask, options: EvaluationOptions, over_cap: int | None = None
) -> tuple[str, str]:
    """The key of a naive baseline's timing in an evaluator's memory: what the timing depends on
    (:func:`executor.basetiming.baseline_key`: the task, its naive.cu and the timing options)."""
    return "baseline", baseline_key(task, options, over_cap)


def _finish_reference_soon(
    proc: WorkerProcess, timeout_s: float, cancelled: threading.Event | None
) -> Future[ReferenceOutcome]:
    """:func:`finish_reference` in a thread of its own, started now: its outcome (or its exception,
    such as :class:`EvaluationCancelled`) in the returned future. An evaluation that returns before
    reading it (its compile failed) leaves the thread to end with the worker, which the evaluation
    closes."""
    future: Future[ReferenceOutcome] = Future()

    def finish() -> None:
        try:
            future.set_result(finish_reference(proc, timeout_s, cancelled))
        except BaseException as e:  # handed to the evaluation with the outcome
            future.set_exception(e)

    threading.Thread(target=finish, name="finish-reference", daemon=True).start()
    return future


def _library_refusal(product: str) -> str | None:
    """Why a function candidate's library is refused for what its dynamic symbols name (the Python C API,
    functions that start processes: :mod:`executor.linkcheck`), or None."""
    try:
        symbols = linkcheck.dynamic_symbols(product)  # read once for both rules
    except (OSError, linkcheck.LibraryFormatError) as e:
        return f"the candidate's library could not be read: {e}"
    names, spawns = linkcheck.python_names(symbols), linkcheck.process_imports(symbols)
    if names:
        return (
            f"the candidate's library names the Python runtime's API ({', '.join(names[:5])}): a candidate "
            "runs inside the process that checks it and must not call into it"
        )
    if spawns:
        return f"the candidate's library imports {', '.join(spawns[:5])}, which start processes: a candidate must only compute"
    return None


def _reference_failure(
    task: FunctionTask | KernelTask,
    stage: Stage,
    message: str,
    compiled: CompileResult,
    seconds: dict[str, float],
) -> Verdict:
    """The task's own reference failed (to build or to run): no reward, the candidate is not to blame."""
    return Verdict(
        task_id=task.id,
        stage=stage,
        passed=False,
        error=ErrorKind.REFERENCE_ERROR,
        message=message,
        compile=compiled,
        seconds=seconds,
    )


def check_deadline(deadline: float | None, where: str) -> None:
    """Raise :class:`EvaluationExpired` when ``deadline`` (``time.monotonic()``) has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise EvaluationExpired(f"{where}: its request's limit passed before it was run")


def evaluate_safely(
    evaluator: Evaluator,
    request: EvaluateRequest,
    cancelled: threading.Event | None = None,
    deadline: float | None = None,
) -> Verdict:
    """Evaluate, turning infrastructure failures into an ``internal_error`` verdict for batch use
    (a cancelled evaluation still raises :class:`EvaluationCancelled`, an expired one
    :class:`EvaluationExpired`)."""
    try:
        return evaluator.evaluate(request.task, request.candidate, request.options, cancelled, deadline)
    except ExecutorError as e:
        logger.exception("evaluation of %s failed", request.task.id)
        return Verdict(
            task_id=request.task.id,
            stage=Stage.STATIC,
            passed=False,
            error=ErrorKind.INTERNAL_ERROR,
            message=str(e),
        )
