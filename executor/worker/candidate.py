"""The candidate worker's flow: prepare while the candidate compiles, then check and time it.

:meth:`Worker.prepare` generates the evaluation's input sets, loads (or draws) the task's timing set and
makes the rotated copies the trials run on (on the device, for kernel tasks); :meth:`Worker.run` checks
the candidate's correctness on every planned set and times it against the serial reference. The naive
CUDA baseline is never timed here, after the candidate's library was loaded: a worker of its own does
that (:mod:`executor.worker.baseline`). A failing check is a
:class:`~executor.worker.runtime.CandidateFailed` signal, turned here into a failed
:class:`~executor.worker.messages.WorkerOutcome`. The expected outputs of an input set are read only
after the candidate has produced its own outputs for that set.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from executor import floor, timingset
from executor.abi import bind_entry, call_entry
from executor.checking import compare_output
from executor.clockcheck import CLOCK_CONFIRM_CALLS, copy_allowance, timed_refusal
from executor.devcompare import DeviceComparer
from executor.errors import ExecutorError
from executor.gpulock import (
    context_creation,
    context_lock_covers_init,
    gpu_shared,
    host_copies,
    kernel_uploads,
)
from executor.inputs import InputSet, generate_inputs
from executor.reference import check_reference_outputs
from executor.taskformat import KernelTask
from executor.verdict import DevicePeak, ErrorKind, FloorCheck, Mismatch, TimingStats
from executor.worker.gpu import (
    DeviceSlots,
    GpuContext,
    GpuFunctionRuntime,
    GpuKernelRuntime,
    RegisteredPages,
    make_slots,
)
from executor.worker.host import (
    DEFAULT_LOCK_MAX_BYTES,
    FunctionRuntime,
    HostFunctionRuntime,
    HostSlots,
    PageLocks,
    RunnerFunctionRuntime,
    SpotSample,
    check_left,
    host_peak,
    locked_size,
    page_aligned_empty,
    vm_locked_bytes,
)
from executor.worker.messages import (
    CLOCK_CONFIRM_CALL,
    PREPARED,
    REPEAT_CONFIRM_CALLS,
    CandidateRun,
    WorkerJob,
    WorkerOutcome,
    expected_path,
    gpu_released,
    input_plan,
    notify_parent,
    write_progress,
)
from executor.worker.runner import Runner, candidate_process_wanted
from executor.worker.runtime import CallWatch, CandidateFailed, Runtime

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunLocks:
    """What a candidate's run holds (:mod:`executor.gpulock`): ``reserve`` through the whole run (the
    turnstile of the trials' longest-awaited lock, taken first, so that no such work begins while the
    candidate is checked and its trials wait only for work begun before); ``checking`` through the correctness
    calls and, when ``timing`` is None, through the trials too; otherwise ``checking`` is let go after
    the checks and ``timing`` taken for the trials."""

    checking: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
    timing: Callable[[], contextlib.AbstractContextManager[None]] | None = None
    reserve: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
    # A function task's run only: what the host checks after the trials hold once the GPU is released
    # (Worker.release_gpu); None: nothing is released, every check runs under the trials' locks.
    after_release: Callable[[], contextlib.AbstractContextManager[None]] | None = None


# What a verdict says of a timing set's values (withheld).
WITHHELD = "(withheld: the timing sets are the executor's secret)"


def withheld(mismatch: Mismatch) -> Mismatch:
    """A timing set's mismatch without its seed and values: the timing sets' seeds come from the
    executor's secret (executor.timingset.timing_secret). A verdict that named one let review 22b draw
    every timing set offline, from a candidate wrong on purpose, and embed their answers in the next
    (18,610x); one that gave the expected value gave a reduction's whole answer, and the candidate's
    own value could carry a key of the set (review 22c)."""
    return mismatch.model_copy(update={"seed": None, "expected": WITHHELD, "got": WITHHELD})


def withheld_message(mismatch: Mismatch) -> str:
    """What a failure on a timing set says: how many elements of which output, no values."""
    return (
        f"{mismatch.count}/{mismatch.total} elements of {mismatch.arg!r} differ from the reference at the "
        f"timing size (first at [{mismatch.index}]; values {WITHHELD})"
    )


# Taken off a function task's first visits besides the caches' share (Worker.check_repeats): on this
# 2-core machine under load, one honest evaluation of a 0.06 ms call had all three first visits at
# 1.07 ms or more (1 in 15 such runs; none in 48 more).
REPEAT_HOST_SLACK_MS = 2.0
# The fewest untimed calls a fresh runner makes before the repeat-visit rule's confirming call (the
# option ``warmup`` where it asks for more): the trials' process had made a correctness call at the
# timing size and its warm-up before its first timed call (review 39b's L1).
REPEAT_CONFIRM_WARMUPS = 2
# The name of the repeat-visit rule's first confirming call, in its verdicts (the others are numbered).
CONFIRMING_CALL = "the confirming call on a fresh set after the trials"


def _within_repeat_rule(first_ms: float, allowance_ms: float, limit: float, stats: TimingStats) -> bool:
    """Whether a first visit of ``first_ms`` (``allowance_ms`` of it allowed for caches) is within the
    repeat-visit rule's ``limit`` times the trials' median (:meth:`Worker.check_repeats`)."""
    return first_ms - allowance_ms <= limit * stats.median_ms


def _candidate_state() -> tuple[frozenset[int], int, frozenset[str]] | None:
    """What in this process could run code of its own accord: the ids of its threads that are not
    Python's (the CUDA driver's, and any a candidate's library started), the set of signals it
    catches (``SigCgt``, as a mask without the C library's own: a handler, say a timer's), and its
    POSIX timers' ids (``/proc/self/timers``: a timer can signal the process, SIGSTOP say, with no
    handler); None when /proc does not say."""
    try:
        tids = {int(name) for name in os.listdir("/proc/self/task")}
        status = Path("/proc/self/status").read_text()
        timers = Path("/proc/self/timers").read_text()
    except (OSError, ValueError):
        return None
    timer_ids = frozenset(
        line.split(":", 1)[1].strip() for line in timers.splitlines() if line.startswith("ID:")
    )
    ours = {t.native_id for t in threading.enumerate()}
    caught = next(
        (line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("SigCgt:")), "0"
    )
    try:
        mask = int(caught, 16) & ~_LIBC_SIGNALS
    except ValueError:
        return None
    return frozenset(tids - ours), mask, timer_ids


# The C library's own signals (32 and 33: thread cancellation and set*id across threads), whose handlers
# it installs when the worker's first threads start (seen here when the copies' check started its pool).
_LIBC_SIGNALS = (1 << 31) | (1 << 32)


class Worker:
    """Runs one candidate job's runtime stages."""

    def __init__(self, job: WorkerJob, gpu: GpuContext | None = None) -> None:
        self.job = job
        self.task = job.task
        self.reference_lib = ctypes.CDLL(job.reference_library)
        self.reference_fn = bind_entry(self.reference_lib, self.task.reference_symbol, self.task)
        self.gpu = gpu
        # A pre-warmed worker's context: how long its parts took (made before the job came).
        self.seconds: dict[str, float] = dict(gpu.seconds) if gpu is not None else {}
        self.plan = input_plan(job.options, job.seeds)
        self.sets: list[InputSet] = []
        self._expected: dict[int, dict[str, np.ndarray]] = {}
        # The fresh timing-size sets' positions in the plan, and what the trials run on.
        self.timing_indices = [i for i, (_, size) in enumerate(self.plan) if size == "timing"]
        self.timing_sources: list[InputSet] = []
        # The stored expected outputs' files whose digests were checked before the run.
        self.expected_checked: dict[str, timingset.StatKey] = {}
        # The set the warm-up runs on: never timed (see _timing_sources).
        self.warm_source: InputSet | None = None
        self.floor: FloorCheck | None = None
        # The device figures and the path of the candidate's calls (device_figures), once per run.
        self._figures: tuple[DevicePeak, Literal["kernel", "gpu_function", "host_function"]] | None = None
        self.slots: HostSlots | DeviceSlots | None = None
        # Device copies of the fresh timing-size sets (kernel tasks), made ahead and used once each.
        self.uploaded: dict[int, dict[str, Any]] = {}
        self.ready_at: float | None = None
        # Checks of timing-size outputs running behind the GPU work (kernel tasks): see check_behind.
        self._checker: ThreadPoolExecutor | None = None
        self._behind: list[tuple[int, Future[None]]] = []
        # ... or left on the device and checked there after the trials (with a comparer).
        self._kept: list[tuple[int, GpuKernelRuntime, dict[str, Any]]] = []
        self.comparer: DeviceComparer | None = None
        # A function candidate's process (executor.worker.runner), started by prepare(), when the
        # operator asks for one (REGRAPH_EXECUTOR_CANDIDATE_PROCESS); else it runs in this process.
        self.use_runner = (
            not isinstance(self.task, KernelTask)
            and self.job.runtime != "none"
            and candidate_process_wanted()
        )
        self.runner: Runner | None = None
        # The threads and signal handlers before the candidate was loaded (see release_gpu).
        self._loaded_state: tuple[frozenset[int], int, frozenset[str]] | None = None
        # The buffers of the repeat-visit rule's confirming call (function tasks; see prepare).
        self.confirm_buffers: dict[str, np.ndarray] | None = None
        # The timed calls' arrays page-locked (option host_memory; see page_locks), made once.
        self._page_locks: PageLocks | None = None

    def _add_seconds(self, key: str, since: float) -> None:
        """Add the time since ``since`` (a perf_counter reading) to ``seconds[key]``."""
        self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - since

    @contextlib.contextmanager
    def _holding(
        self, lock: Callable[[], contextlib.AbstractContextManager[None]], key: str
    ) -> Iterator[None]:
        """Hold ``lock`` for the block; the wait for it is added to ``seconds[key]``."""
        waited = time.perf_counter()
        with lock():
            self._add_seconds(key, waited)
            yield

    def progress(self, stage: str) -> None:
        """Record the current stage, so that a timeout can say where it happened."""
        write_progress(self.job.progress_path, stage)

    def prepare(self) -> None:
        """Everything that does not depend on the candidate, done while it compiles: every planned
        input set, the sets the trials run on and their rotated copies (on the device for kernel
        tasks, where the CUDA context is already made)."""
        t0 = time.perf_counter()
        if self.use_runner and self.runner is None:
            # Started first: its start-up (and its CUDA context) goes on beside the preparation.
            self.runner = Runner(self.job.runtime)
            self._add_seconds("runner_start", t0)
        self.progress("inputs")
        self.sets = [generate_inputs(self.task, size, seed, self.reference_lib) for seed, size in self.plan]
        self.seconds["inputs"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        if self.job.options.run_timing:
            self.timing_sources = self._timing_sources()
            self.expected_checked = self._check_expected_ahead()
            # Device uploads wait for (and never overlap) another worker's trials, but go on beside
            # untimed checks. A function task's host copies (hundreds of MB) wait for function
            # tasks' trials only, a chunk at a time: made beside those trials, whose calls copy from
            # host memory and are timed on the host clock, they made them noisier (H200,
            # 2026-11-27: twice the trials on the steady queue; bench/results/2026-11-27_h200_s11),
            # while kernel tasks' trials never read host memory.
            # Both are made a chunk at a time, each chunk under its own hold of the lock, so that
            # trials wait for one chunk at most (an upload holding the lock whole kept them waiting
            # hundreds of ms: bench/results/2026-11-27_s13).
            self.seconds["prepare_lock_wait"] = 0.0
            kernel = isinstance(self.task, KernelTask)
            chunk_lock = functools.partial(
                self._holding, kernel_uploads if kernel else host_copies, "prepare_lock_wait"
            )
            self.slots = self._prepared_slots(chunk_lock)
            if self.timing_sources and self.job.options.repeat_confirm and not kernel and not self.use_runner:
                # The repeat-visit rule's confirming call's buffers (confirm_first_visit), made before
                # the candidate runs so that their addresses are none it has seen; not touched (their
                # pages are taken) unless that call is made.
                locks = self.page_locks()
                empty = np.empty if locks is None else page_aligned_empty
                self.confirm_buffers = {
                    name: empty(a.shape, a.dtype) for name, a in self.timing_sources[0].arrays.items()
                }
                if locks is not None:  # the confirming call is timed as a first visit is: the same memory
                    locks.lock_all(self.confirm_buffers.values(), reserved=True)
            if isinstance(self.slots, DeviceSlots):
                self.uploaded = self._uploaded_timing_sets(chunk_lock)
                with gpu_shared():
                    self.comparer = self._comparer()
        self.seconds["timing_inputs"] = time.perf_counter() - t1
        if self.runner is not None:  # its start-up (and CUDA context) before the run's limit applies
            t2 = time.perf_counter()
            self.runner.start()
            self._add_seconds("runner_start", t2)
        self.ready_at = time.monotonic()
        # The parent takes its GPU lock for the candidate only once this is written, so the run does
        # not wait for the preparation while holding it.
        self.progress(PREPARED)
        notify_parent()

    def _uploaded_timing_sets(
        self, lock: Callable[[], contextlib.AbstractContextManager[None]]
    ) -> dict[int, dict[str, Any]]:
        """Device copies of the fresh timing-size sets for their correctness runs (uploading hundreds
        of MB from pageable memory would otherwise wait for the candidate), each chunk under
        ``lock``. Empty when they do not fit: then each run uploads its set itself."""
        assert self.gpu is not None
        uploaded: dict[int, dict[str, Any]] = {}
        try:
            for index in self.timing_indices:
                uploaded[index] = self.gpu.upload(self.sets[index], lock=lock)
        except self.gpu.cuda.Error as e:
            logger.warning("the timing-size sets are uploaded by their runs: %s", e)
            for buffers in uploaded.values():
                GpuKernelRuntime.free(buffers)
            return {}
        return uploaded

    def _comparer(self) -> DeviceComparer | None:
        """The comparison kernels, when the job names them and the options allow; None (every output
        is compared on the host) when loading them fails."""
        product = self.job.compare_product
        if self.gpu is None or product is None or not self.job.options.compare_on_device:
            return None
        try:
            return DeviceComparer(self.gpu.cuda, product)
        except self.gpu.cuda.Error as e:
            logger.warning("outputs are compared on the host: %s", e)
            return None

    def _timing_sources(self) -> list[InputSet]:
        """The sets the trials rotate through: the task's ``timing_sets`` timing sets (each drawn from
        its own seed), or the fresh timing-size sets with more drawn beside them; and (in
        ``warm_source``) the set the warm-up runs on, which is never timed: the evaluation's fresh
        timing-size set, or one more drawn set. So no timed call sees the values of the call before
        it, and the first timed call does not see the warm-up's."""
        spec, count = self.job.timing_set, self.job.options.timing_sets
        if spec is None:
            fresh = [self.sets[i] for i in self.timing_indices]
            base = fresh[0].seed if fresh else 0
            drawn = [self._drawn(timingset.variant_seed(base, k)) for k in range(len(fresh), count + 1)]
            sources = fresh + drawn
            self.warm_source = sources.pop()
            return sources
        # Not stored yet (the task's first evaluation): drawn here from the same seed, as the
        # reference worker does; generation is deterministic for a seed.
        sources = [
            timingset.load_inputs(variant, self.task) or self._drawn(variant.seed)
            for variant in timingset.variants(spec, count)
        ]
        self.warm_source = (
            self.sets[self.timing_indices[0]]
            if self.timing_indices
            else self._drawn(timingset.variant_seed(spec.seed, count))
        )
        return sources

    def _drawn(self, seed: int) -> InputSet:
        return generate_inputs(self.task, "timing", seed, self.reference_lib)

    def page_locks(self) -> PageLocks | None:
        """The page locks of a function task's timed calls' arrays when the options ask for them
        (``host_memory: page_locked``), made once: registered with the driver on a GPU, ``mlock`` on the
        host runtime; one that has failed already (its ``failure`` says why) where they cannot be: a
        candidate process of its own (its arrays are shared mappings, locked by none), no CUDA context
        ahead of the job. None when not asked for."""
        if (
            self.job.options.host_memory != "page_locked"
            or isinstance(self.task, KernelTask)
            or self.job.runtime == "none"
        ):
            return None
        if self._page_locks is None:
            cap = self.job.host_lock_max_bytes
            max_bytes = DEFAULT_LOCK_MAX_BYTES if cap is None else cap
            locks = PageLocks(max_bytes)
            if self.use_runner:
                locks.fail("the candidate runs in a process of its own, on shared mappings: left pageable")
            elif self.job.runtime == "gpu" and self.gpu is None:
                locks.fail("no CUDA context ahead of the job: left pageable")
            elif self.gpu is not None:
                try:
                    locks = RegisteredPages(max_bytes)
                except (OSError, AttributeError) as e:
                    locks.fail(f"the driver's cuMemHostRegister: {e}")
            # A confirming call's set (prepare: confirm_buffers) counted against the cap by every worker,
            # a baseline's too and whether or not that call is made (repeat_confirm is no part of a
            # baseline's key): the cap applies to one total for a task's baseline and its candidates.
            if self.timing_sources:
                locks.reserved = sum(locked_size(a.nbytes) for a in self.timing_sources[0].arrays.values())
            self._page_locks = locks
        return self._page_locks

    def note_page_locks(self) -> None:
        """What became of ``host_memory: page_locked`` in ``seconds``: ``host_page_locked`` (not
        seconds: the host memory the timed calls really ran on, 1.0 when every array was locked, else
        0.0: pageable; the evaluator compares a candidate's with its baseline's), the bytes locked
        (``host_locked_bytes``), the time it took (``host_lock``), this process's locked memory as the
        kernel counts it (``host_vmlck_bytes``: mlock's, on the host runtime), or ``host_lock_failed``
        (the arrays are pageable; the worker's log says why: a refusal, the cap, no context), with
        ``host_lock_over_cap`` when the cap was the reason; ``host_lock_total_bytes``: the bytes the cap
        was applied to (locked, or asked, and those kept for a confirming call), when locked or over it."""
        locks = self._page_locks
        if locks is None:
            return
        if locks.failure is not None:
            if not self.seconds.get("host_lock_failed"):
                logger.warning("the timed calls' arrays are pageable: %s", locks.failure)
            self.seconds["host_lock_failed"] = 1.0
            self.seconds["host_page_locked"] = 0.0
            if locks.over_cap:  # the cap, not a refusal (a baseline timed so is kept: evaluate.py)
                self.seconds["host_lock_over_cap"] = 1.0
                self.seconds["host_lock_total_bytes"] = float(locks.total)
            return
        # what the cap was applied to (the evaluator reads a baseline locked under another executor's
        # cap only when this fits under its own)
        self.seconds["host_lock_total_bytes"] = float(locks.bytes + locks.reserved)
        self.seconds["host_page_locked"] = 1.0
        self.seconds["host_locked_bytes"] = float(locks.bytes)
        self.seconds["host_lock"] = locks.seconds
        self.seconds["host_vmlck_bytes"] = float(vm_locked_bytes())

    def recheck_page_locks(self) -> None:
        """After the timed calls (and a confirming call), still under their locks: whether every array
        locked for them still is (:meth:`PageLocks.lost`). The candidate shares this process and can
        unlock them (``munlock``; on a GPU ``cudaHostUnregister``, which a per-call register/unregister
        pattern does to the executor's registration): then ``host_page_locked`` is 0.0 (its timed calls
        ran, at least in part, on pageable memory; the evaluator compares it with no page-locked
        baseline) and ``host_locks_lost`` counts the arrays. Where that cannot be told (smaps does not
        say), ``host_locks_unchecked`` is 1.0 and they count as held (as before review 44)."""
        locks = self._page_locks
        if locks is None or locks.failure is not None:
            return
        lost = locks.lost()
        if lost is None:  # smaps does not say: not counted as lost (it would be on every run)
            logger.info(
                "the timed calls' locked arrays could not be checked after them (no VmFlags in smaps)"
            )
            self.seconds["host_locks_unchecked"] = 1.0
            return
        if lost:
            logger.warning(
                "%d of the timed calls' %d locked arrays were unlocked during them", lost, len(locks.locked)
            )
            self.seconds["host_page_locked"] = 0.0
            self.seconds["host_locks_lost"] = float(lost)

    def _prepared_slots(
        self, lock: Callable[[], contextlib.AbstractContextManager[None]]
    ) -> HostSlots | DeviceSlots | None:
        """The rotated copies made ahead, each chunk copied under ``lock``; None when that fails, in
        which case the timing stage makes them again and the failure (no device memory, no context)
        becomes the candidate's verdict."""
        if isinstance(self.task, KernelTask) and self.gpu is None:
            if self.job.runtime != "gpu":
                return None
            # as a spare's context is made (executor.worker.process)
            self.gpu = GpuContext.create_or_none(context_creation, context_lock_covers_init())
            if self.gpu is None:
                return None
            self.seconds.update(self.gpu.seconds)
        errors: tuple[type[BaseException], ...] = (CandidateFailed, ExecutorError)
        if self.gpu is not None:
            errors = (*errors, self.gpu.cuda.Error)
        try:
            return make_slots(
                self.task,
                self.gpu,
                self.timing_sources,
                self.job.options,
                lock,
                self.warm_source,
                shared=self.use_runner,
                page_locks=self.page_locks(),
            )
        except errors as e:
            logger.warning("no timing buffers ahead of the candidate: %s", e)
            return None

    def runtime_for(self, product: str, symbol: str) -> Runtime:
        """The runtime that fits the job: a kernel launched here, or a function (host or GPU) loaded and
        called here, or in the candidate's own process (:mod:`executor.worker.runner`) when asked for."""
        if self.job.runtime == "host" and not self.use_runner:
            return HostFunctionRuntime(self.task, product, symbol)
        if self.job.runtime != "host" and self.gpu is None:
            # No context ahead (a spare's failed): made now, inside the run's checking lock.
            self.gpu = GpuContext()
            self.seconds.update(self.gpu.seconds)
        if isinstance(self.task, KernelTask):
            assert self.gpu is not None
            return GpuKernelRuntime(self.gpu, self.task, product, symbol)
        if not self.use_runner:
            assert self.gpu is not None
            return GpuFunctionRuntime(self.gpu, self.task, product, symbol)
        if self.runner is None:
            self.runner = Runner(self.job.runtime)
        device = Runtime.device if self.gpu is None else self.gpu.device
        candidate = RunnerFunctionRuntime(self.runner, self.task, product, symbol, device)
        self.seconds["runner_roundtrip"] = candidate.roundtrip_s
        return candidate

    def expected(self, index: int) -> dict[str, np.ndarray]:
        """The reference's outputs for planned set ``index``: called only after the candidate has run
        on that set, so the answer is never in this process while the candidate computes it."""
        if index not in self._expected:
            if self.job.expected_dir is not None:
                t0 = time.perf_counter()
                directory = Path(self.job.expected_dir)
                self._expected[index] = {
                    a.name: timingset.read_outputs(expected_path(directory, index, a.name))
                    for a in self.task.outputs
                }
                self._add_seconds("expected_load", t0)
            else:
                work = self.sets[index].copy()
                call_entry(self.reference_fn, self.task, work.scalars, work.arrays)
                outputs = {a.name: work.arrays[a.name] for a in self.task.outputs}
                check_reference_outputs(self.task, outputs)
                self._expected[index] = outputs
        return self._expected[index]

    def check(
        self,
        inputs: InputSet,
        got: dict[str, np.ndarray],
        expected: dict[str, np.ndarray],
        key: str = "compare",
    ) -> None:
        """Raise CandidateFailed on the first output that disagrees with the reference (the time spent
        is added to ``seconds[key]``)."""
        for arg in self.task.outputs:
            t0 = time.perf_counter()
            failure = compare_output(
                self.task, arg, got[arg.name], expected[arg.name], inputs.size, inputs.seed
            )
            self._add_seconds(key, t0)
            if failure is not None:
                kind, mismatch = failure
                raise CandidateFailed(
                    kind,
                    f"{mismatch.count}/{mismatch.total} elements of {arg.name!r} differ from the reference "
                    f"at the {inputs.size} size (first at [{mismatch.index}]: "
                    f"expected {mismatch.expected}, got {mismatch.got})",
                    mismatch,
                )

    def check_device_outputs(
        self,
        candidate: GpuKernelRuntime,
        inputs: InputSet,
        outputs: dict[str, Any],
        expected: dict[str, np.ndarray],
        key: str = "compare",
    ) -> None:
        """Check a kernel's outputs where it left them (device buffers): on the device when the
        comparer decides that every element passes; otherwise (failures, or a rule the device does not
        decide) downloaded and checked on the host, which names the failure."""
        if self.comparer is not None:
            t0 = time.perf_counter()
            try:
                passed = all(
                    self.comparer.failures(
                        self.task.compare_rule(arg),
                        arg.dtype,
                        outputs[arg.name],
                        inputs.arrays[arg.name].size,
                        expected[arg.name],
                    )
                    == 0
                    for arg in self.task.outputs
                )
            except self.comparer.cuda.Error as e:
                raise CandidateFailed(ErrorKind.CUDA_ERROR, f"CUDA error while checking outputs: {e}") from e
            finally:
                self._add_seconds(key, t0)
            if passed:
                return
        t0 = time.perf_counter()
        got = candidate.download(inputs, outputs)
        self._add_seconds("download", t0)
        self.check(inputs, got, expected, key)

    def check_later(self, index: int, candidate: GpuKernelRuntime, outputs: dict[str, Any]) -> None:
        """Check the device outputs of planned set ``index`` on the device after the trials, when
        :meth:`checks_behind_failure` is called (the expected outputs are read then)."""
        self._kept.append((index, candidate, outputs))

    def check_behind(self, index: int, got: dict[str, np.ndarray]) -> None:
        """Check planned set ``index`` in a thread (its expected outputs are read there, now that the
        candidate has run on it); :meth:`checks_behind_failure` collects the result."""
        inputs = self.sets[index]
        if self._checker is None:
            self._checker = ThreadPoolExecutor(1, thread_name_prefix="executor-check")
        future = self._checker.submit(
            lambda: self.check(inputs, got, self.expected(index), key="compare_behind")
        )
        self._behind.append((index, future))

    def checks_behind_failure(self, on_device: bool = True) -> tuple[int, CandidateFailed] | None:
        """Finish the checks of :meth:`check_later` and :meth:`check_behind`; the first failing set's
        index and failure, if any (an ExecutorError from the task's own reference is raised as it
        would be in line). ``on_device=False`` (after a CUDA error, which leaves the context
        unusable) drops the checks that would run on the device."""
        kept, self._kept = self._kept, []
        if not on_device:
            kept = []
        for position, (index, candidate, outputs) in enumerate(kept):
            try:
                self.check_device_outputs(
                    candidate, self.sets[index], outputs, self.expected(index), key="compare_behind"
                )
            except CandidateFailed as e:
                for _, owner, unchecked in kept[position:]:
                    owner.free(unchecked)
                return index, e
            candidate.free(outputs)
        behind, self._behind = self._behind, []
        for index, future in behind:
            try:
                future.result()
            except CandidateFailed as e:
                for _, pending in behind:
                    pending.cancel()
                return index, e
        return None

    def behind_outcome(self, device: str, after: CandidateFailed | None = None) -> WorkerOutcome | None:
        """The correctness failure of a check left for later (after waiting for them all), or None.
        ``after``: the failure that ended the run, after which the device may no longer be usable."""
        on_device = after is None or after.kind is not ErrorKind.CUDA_ERROR
        failed = self.checks_behind_failure(on_device)
        return None if failed is None else self.outcome(failed[1], "correctness", failed[0], device)

    def run(self, run: CandidateRun, locks: RunLocks | None = None) -> WorkerOutcome:
        """Correctness on fresh input sets, then timing; failures come back as outcomes. ``locks``:
        what the correctness calls and the trials hold (:class:`RunLocks`; by default nothing)."""
        locks = locks or RunLocks()
        if not self.sets:
            self.prepare()
        with contextlib.ExitStack() as reserved, contextlib.ExitStack() as held:
            reserved.enter_context(locks.reserve())
            held.enter_context(self._holding(locks.checking, "run_lock_wait"))
            checked = self.check_correctness(run)
            if isinstance(checked, WorkerOutcome):
                return checked
            candidate, done = checked
            if locks.timing is not None:
                held.close()  # the trials' own lock, taken after the checks' is let go
                held.enter_context(self._holding(locks.timing, "timing_lock_wait"))
            release = None
            if locks.after_release is not None:
                after = locks.after_release

                def release() -> None:
                    # The trials' locks and the reservation go first: the evaluator holds the
                    # device's locks shared for this worker from the note on, and ends the turn.
                    held.close()
                    reserved.close()
                    gpu_released()
                    held.enter_context(self._holding(after, "checks_lock_wait"))

            return self.timing(candidate, run, done, release)

    def check_correctness(self, run: CandidateRun) -> tuple[Runtime, int] | WorkerOutcome:
        """The correctness stage: the loaded candidate and the number of sets checked, or the outcome
        that ends the run (a failure, or success when nothing is timed)."""
        opts = self.job.options
        if run.sent_at is not None:
            # From the hand-over to here: reading the message, and waiting for the worker's
            # preparation (both clocks are the system's monotonic clock).
            self.seconds["handover"] = max(0.0, time.monotonic() - run.sent_at)
            if self.ready_at is not None:
                # The part of the preparation that the candidate had to wait for.
                self.seconds["inputs_wait"] = max(0.0, self.ready_at - run.sent_at)
        t0 = time.perf_counter()
        self.progress("correctness")
        # What of this process could run the candidate's code later: compared at the GPU's release.
        self._loaded_state = _candidate_state()
        try:
            candidate = self.runtime_for(run.candidate_product, run.candidate_symbol)
        except CandidateFailed as e:  # refused as its own process loaded it (executor.worker.runner)
            self.seconds["correctness"] = time.perf_counter() - t0
            return self.outcome(e, "correctness", 0, Runtime.device if self.gpu is None else self.gpu.device)
        # Loading the candidate (its module or library, and the CUDA context when none was made ahead).
        self._add_seconds("load", t0)
        # Each of the candidate's calls is announced to the parent, which kills a call that runs past
        # its limit (the baseline's are not: only the run limit applies to them).
        candidate.watch = CallWatch.to_parent(run.call_limit)
        checked = opts.correctness_sets + opts.timing_size_checks
        # A kernel's timing-size outputs are checked after the trials on the device, or (no comparer)
        # in a thread while the GPU warms up and times (device-timed trials do not see the host's
        # work); the verdict waits for that check.
        overlap = opts.run_timing and isinstance(candidate, GpuKernelRuntime)
        done = 0
        try:
            for index in range(checked):
                inputs = self.sets[index]
                # Candidate first, then the reference's answer, then the candidate again on other data:
                # a candidate that caches results between calls answers the next set with stale values.
                uploaded = self.uploaded.pop(index, None)
                call = f"the call on input set {index + 1} of {checked} ({inputs.size} size)"
                if overlap and inputs.size == "timing" and self.comparer is not None:
                    # Left on the device and checked there after the trials (no download).
                    assert isinstance(candidate, GpuKernelRuntime)
                    self.check_later(index, candidate, candidate.run_on_device(inputs, uploaded, call))
                elif overlap and inputs.size == "timing":
                    self.check_behind(index, candidate.run(inputs, uploaded, call))
                else:
                    self.check(inputs, candidate.run(inputs, uploaded, call), self.expected(index))
                done += 1
            # Repeat the first set: a race that happened to pass once should not pass twice by luck.
            try:
                again = candidate.run(self.sets[0], call="the call on input set 1 again")
                self.check(self.sets[0], again, self.expected(0))
            except CandidateFailed as e:
                raise CandidateFailed(
                    ErrorKind.NONDETERMINISTIC,
                    "the same inputs gave a correct answer once and a wrong one later: " + str(e),
                    e.mismatch,
                ) from e
        except CandidateFailed as e:
            self.seconds["correctness"] = time.perf_counter() - t0
            # An earlier set checked in a thread may have failed first.
            return self.behind_outcome(candidate.device, e) or self.outcome(
                e, "correctness", done, candidate.device
            )
        self.seconds["correctness"] = time.perf_counter() - t0
        if not opts.run_timing:
            return WorkerOutcome(
                passed=True,
                stage="correctness",
                input_sets_checked=done,
                device=candidate.device,
                seconds=self.seconds,
            )
        return candidate, done

    def timing(
        self,
        candidate: Runtime,
        run: CandidateRun,
        checked: int,
        release: Callable[[], None] | None = None,
    ) -> WorkerOutcome:
        """Time the candidate and (unless its timing is known) the serial reference at the timing size.

        The trials run on rotated copies of the task's timing set (or of the fresh timing-size sets),
        whose reference outputs are known, so the last trial's outputs are checked without running the
        serial reference again. ``release``: called once the candidate's GPU work is over and only host
        checks are left (:meth:`release_gpu`), which then run outside the GPU's turn.
        """
        opts = self.job.options
        t0 = time.perf_counter()
        self.progress("timing")
        if not self.timing_sources:
            self.timing_sources = self._timing_sources()
        sources = self.timing_sources
        try:
            slots = self.slots or make_slots(
                self.task,
                self.gpu,
                sources,
                opts,
                warm=self.warm_source,
                shared=self.use_runner,
                page_locks=self.page_locks(),
            )
            self.note_page_locks()
            if self.gpu is not None:
                # Nothing a candidate left on the device (a persisting-L2 window) times this one.
                self.gpu.reset_timing_state()
            candidate.reset_timing_state()  # the candidate's own process's device, if any
            if isinstance(candidate, FunctionRuntime):
                candidate.first_visit_delay_s = run.first_visit_delay_ms / 1e3
            candidate.spot_seed = run.spot_seed  # the executor's, not this process's entropy (session 35)
            if (
                isinstance(candidate, GpuKernelRuntime)
                and self.comparer is not None
                and opts.kernel_spot_gather
            ):
                candidate.spot_gather = self.comparer.spot_gather()  # None: copied run by run
                # Which way the spot samples were copied (review 44: a fallback was silent).
                self.seconds["spot_gather"] = 0.0 if candidate.spot_gather is None else 1.0
            stats, last = candidate.time(slots, opts)
            self.seconds["timing_trials"] = time.perf_counter() - t0
            if "warmup" in last:  # kernel tasks: the part of the trials spent warming up
                self.seconds["timing_warmup"] = last["warmup"]["seconds"]
            if last.get("gate", {}).get("off"):  # kernel tasks timed without their launch gate: why
                logger.warning("%s", last["gate"]["off"])
                self.seconds["launch_gate_off"] = 1.0
            # Still under the trials' locks: one more first visit when the repeat-visit rule would refuse.
            confirmation = self.confirm_first_visit(
                candidate, stats, last.get("samples_ms"), len(sources), run.repeat_confirm_seeds
            )
            clock_confirmation = self.confirm_clock(
                candidate, stats, last, len(sources), run.clock_confirm_seeds
            )
            self.recheck_page_locks()
            if release is not None:
                self.release_gpu(candidate, release)
            t1 = time.perf_counter()
            candidate.check_copies(last)
            self._add_seconds("input_check", t1)
            failed_behind = self.behind_outcome(candidate.device)
            if failed_behind is not None:
                self.seconds["timing"] = time.perf_counter() - t0
                return failed_behind
            # The last timed call on every timing set must still be right: answers remembered from
            # earlier calls, races and state kept across calls that only show up under repetition
            # are caught here.
            t1 = time.perf_counter()
            self.check_timed_calls(candidate, sources, last)
            self._add_seconds("last_check", t1)
            confirmed_ms: list[float] | None = None
            if confirmation is not None:  # the last one (confirm_first_visit checked the others)
                confirmed_ms, fresh, work, call = confirmation
                self.check_confirmation(candidate, fresh, work, call)
            if clock_confirmation is not None:  # the last one (confirm_clock checked the others)
                self.check_confirmation(candidate, *clock_confirmation, seconds="clock_confirm")
            self.check_floor(candidate, stats)
            self.check_repeats(candidate, stats, last.get("samples_ms"), len(sources), confirmed_ms)
        except CandidateFailed as e:
            self.seconds["timing"] = time.perf_counter() - t0
            # A correctness failure comes first.
            return self.behind_outcome(candidate.device, e) or self.outcome(
                e, "timing", checked, candidate.device
            )
        # Neither the serial reference nor the naive baseline is timed here: this process has loaded
        # the candidate's library, which may slow what runs after it or rewrite what it reports. The
        # evaluator times the reference in a reference worker (and keeps its own copy of the timing
        # it hands over here), the baseline in a worker of its own (executor.worker.baseline).
        ref_stats = run.reference_timing
        self.seconds["timing"] = time.perf_counter() - t0
        return WorkerOutcome(
            passed=True,
            stage="timing",
            input_sets_checked=checked + 1,
            candidate_timing=stats,
            first_visits_ms=None
            if isinstance(candidate, GpuKernelRuntime)
            else last["samples_ms"][: len(sources)],
            reference_timing=ref_stats,
            device=candidate.device,
            seconds=self.seconds,
            floor=self.floor,
        )

    def release_gpu(self, candidate: Runtime, release: Callable[[], None]) -> None:
        """End the candidate's GPU work and, unless this process shows a way for the candidate's code to
        run on of its own accord, call ``release`` (the evaluator then ends the run's GPU turn; the host
        checks that follow run outside it, under the same limits, and decide the verdict as before).
        Before it: the device figures that the floor needs (measured on the device when the job brings
        none), and a synchronisation of this worker's context, so that nothing the calls queued in it is
        still in flight (a candidate in a process of its own is stopped already: its runtime's
        ``calls_done``; a process that one cloned is not). Not released (``release_refused``; the checks
        then run under the turn, as before) when this process has a thread that is neither one of its
        own Python threads nor there before the candidate's library was loaded, a signal handler set
        since, or a POSIX timer made since. A screen, not a proof: a handler replaced on a signal that
        was caught already, or a Python thread started through the interpreter, passes it; the parent's
        deadline after the release and its kill of a stopped worker (WorkerProcess.wait) bound the
        rest."""
        t0 = time.perf_counter()
        self.device_figures(candidate)
        if self.gpu is not None:
            self.gpu.synchronize()
        before, now = self._loaded_state, _candidate_state()
        if before is None or now is None:
            self.seconds["release_refused"] = 1.0  # /proc did not say
            return
        if not now[0] <= before[0] or now[1] != before[1] or not now[2] <= before[2]:
            # not seconds: why (threads started since the load; whether the caught signals changed;
            # timers made since the load)
            self.seconds["release_refused"] = 1.0
            self.seconds["release_new_threads"] = float(len(now[0] - before[0]))
            self.seconds["release_new_handlers"] = float(now[1] != before[1])
            self.seconds["release_new_timers"] = float(len(now[2] - before[2]))
            return
        release()
        self._add_seconds("release", t0)

    def check_timed_calls(self, candidate: Runtime, sources: list[InputSet], last: dict[str, Any]) -> None:
        """Check the outputs of the last timed call on every slot of the trials (each a timing set
        whose expected outputs are known); a failure names the call and the set."""
        if "device_checks" in last:
            assert isinstance(candidate, GpuKernelRuntime)
            checks = last["device_checks"]
        elif "checks" in last:
            checks = last["checks"]
        else:  # a runtime that reports only its last trial
            checks = [(last["set"], "the last timed call", last.get("device_outputs", last.get("outputs")))]
        expected_for = functools.cache(self.timing_expected)  # each source's read (or computed) once

        def check_one(source: int, call: str, outputs: Any) -> None:
            inputs, expected = sources[source], expected_for(source)
            try:
                if isinstance(candidate, GpuKernelRuntime):
                    self.check_device_outputs(candidate, inputs, outputs, expected)
                else:
                    self.check(inputs, outputs, expected)
            except CandidateFailed as e:
                mismatch, what = e.mismatch, str(e)
                if self.sets_withheld and mismatch is not None:
                    mismatch = withheld(mismatch)
                    what = withheld_message(mismatch)
                raise CandidateFailed(
                    e.kind, f"{call} (on timing set {source + 1} of {len(sources)}): {what}", mismatch
                ) from e

        if self.comparer is not None and isinstance(candidate, GpuKernelRuntime):
            # A kernel's copies set by set, each set's reference uploaded once for its copies and
            # freed before the next set's (the trials are over: no candidate code runs between these
            # checks).
            self.comparer.check_each(checks, check_one)
        else:
            for source, call, outputs in checks:
                check_one(source, call, outputs)
        # After the whole checks: work written into a last call's outputs before them is seen here, and
        # after them was not in what they read (executor.worker.host.check_left).
        for call, outputs, left in last.get("left", []):
            check_left(call, outputs, left)
        for source, call, sample in last.get("spot_checks", []):
            self.check_spot(sources[source], sample, expected_for(source), call, source, len(sources))

    @property
    def sets_withheld(self) -> bool:
        """Whether the timing sets' seeds and values stay out of a failure's report: the task's timing
        sets are kept for every candidate (:func:`withheld`); an evaluation's own fresh sets
        (``timing_inputs: "fresh"``) are never used again."""
        return self.job.options.timing_inputs == "task"

    def check_spot(
        self,
        inputs: InputSet,
        sample: dict[str, SpotSample],
        expected: dict[str, np.ndarray],
        call: str,
        source: int,
        sources: int,
    ) -> None:
        """A spot check (:func:`executor.worker.host.spot_sample`): the values one timed call left at
        sampled positions of each output (or in all of it), against the reference's at the same
        positions, by the output's own rule; a failure names the call, the set and the element's
        index in the output."""
        for arg in self.task.outputs:
            kept = sample.get(arg.name)
            if kept is None:  # kept in the call's other part (executor.worker.host.spot_sample)
                continue
            want = expected[arg.name].reshape(-1)
            if kept.positions is not None:
                want = want[kept.positions]
            t0 = time.perf_counter()
            failure = compare_output(self.task, arg, kept.values, want, inputs.size, inputs.seed)
            self._add_seconds("spot_check", t0)
            if failure is None:
                continue
            kind, mismatch = failure
            if self.sets_withheld:
                mismatch = withheld(mismatch)
            if kept.positions is not None:
                index = int(kept.positions[mismatch.index])
                mismatch = mismatch.model_copy(update={"index": index})
            checked = f"{mismatch.total} sampled elements" if kept.positions is not None else "every element"
            raise CandidateFailed(
                kind,
                f"{call} (on timing set {source + 1} of {sources}, a spot check of {checked} of "
                f"{arg.name!r}, checked after the trials): {mismatch.count} differ from the reference "
                f"(first at [{mismatch.index}]"
                + (
                    f"; values {WITHHELD})"
                    if self.sets_withheld
                    else f": expected {mismatch.expected}, got {mismatch.got})"
                ),
                mismatch,
            )

    def check_floor(self, candidate: Runtime, stats: TimingStats) -> None:
        """Compare the candidate's median with the task's physical floor on this device
        (:mod:`executor.floor`); below it, the candidate is ``implausible``."""
        if not self.job.options.physical_floor:
            self.floor = FloorCheck(measured_ms=stats.median_ms, reason="no floor: physical_floor is off")
            return
        peak, kind = self.device_figures(candidate)
        check = floor.physical_floor(self.task, peak, kind)
        self.floor = check = check.model_copy(update={"measured_ms": stats.median_ms})
        if check.floor_ms is not None and stats.median_ms < check.floor_ms:
            raise CandidateFailed(ErrorKind.IMPLAUSIBLE, floor.implausible_message(check))

    def device_figures(
        self, candidate: Runtime
    ) -> tuple[DevicePeak, Literal["kernel", "gpu_function", "host_function"]]:
        """The device's figures (:mod:`executor.peak`) and which path the candidate's calls take. This
        process runs the candidate's code, so what it measures bounds this job alone and is never kept."""
        if self._figures is not None:
            return self._figures
        kind: Literal["kernel", "gpu_function", "host_function"] = "host_function"
        if self.job.runtime == "host":
            peak = self.job.device_peak or floor.device_peak(None, "host", host_peak)
        else:
            gpu = self.gpu
            assert gpu is not None
            kind = "kernel" if isinstance(candidate, GpuKernelRuntime) else "gpu_function"
            peak = self.job.device_peak or floor.device_peak(None, gpu.dev.name(), gpu.measure_peak)
        self._figures = peak, kind
        return peak, kind

    def _repeat_rule(
        self, candidate: Runtime, stats: TimingStats, samples: list[float] | None, sets: int
    ) -> tuple[float, float, float] | None:
        """The repeat-visit rule's figures (:meth:`check_repeats`): the fastest first visit, what of it
        is allowed for caches, and the limit; None where the rule does not apply."""
        limit = self.job.options.repeat_gain_limit
        if limit is None or not samples or len(samples) <= sets:
            return None
        first = min(samples[:sets])
        try:
            read, written = floor.task_bytes(self.task)
        except ValueError:
            read = written = 0  # sizes unknown: nothing taken off (the median is compared as it is)
        peak, kind = self.device_figures(candidate)
        gbps = peak.dram_gbps if kind == "kernel" else peak.host_gbps
        allowance = 2 * (read + written) / (gbps * 1e6) if gbps > 0 else 0.0
        if kind != "kernel":  # the host clock: a loaded host once held all 3 first calls of 0.06 ms for 1 ms
            allowance += REPEAT_HOST_SLACK_MS
        return first, allowance, limit

    def confirm_first_visit(
        self,
        candidate: Runtime,
        stats: TimingStats,
        samples: list[float] | None,
        sets: int,
        seeds: list[int],
    ) -> tuple[list[float], InputSet, InputSet, str] | None:
        """Where the repeat-visit rule would refuse a function candidate (option ``repeat_confirm``):
        up to :data:`~executor.worker.messages.REPEAT_CONFIRM_CALLS` more first visits for a candidate in
        a runner (one in its worker's process, whose buffers for it are made once: a second call there
        would come at an address the candidate had seen), right after the
        trials and under their locks, each on a set drawn then at the timing size from the next of
        ``seeds`` (the executor's, distinct: :attr:`CandidateRun.repeat_confirm_seeds`; none: no
        confirmation; drawn from this process's entropy, which its candidate can patch, the set was
        known to it ahead: session 35), in buffers of its own (:meth:`FunctionRuntime.first_visit`),
        stopping at the first that is within the rule's bound. One call was not enough: on this 2-core
        host under load an honest call was held off its core past the bound about 1 run in 20 (session
        39). Each is checked (:meth:`check_confirmation`): each but the last here, under the locks,
        before the next is made (one set and what it left held at a time), the last once the GPU is
        released. A candidate in a runner (killed after the trials) makes each in a fresh runner, only
        where the rule would refuse: the set drawn first, then the runner started, loaded and warmed up
        (``warmup`` untimed calls, at least :data:`REPEAT_CONFIRM_WARMUPS`), the call made at once, and
        the runner killed at its acknowledgement, before what the call left is copied
        (:meth:`~executor.worker.host.RunnerFunctionRuntime.confirming_runtime`; review 38's M1, mended
        after reviews 39 and 39b). One that cannot be started, loaded or warmed up (a failure before
        its load, or one it reports) makes no more, and the rule judges what was made (with none, its
        refusal stands); one that dies or exits once its load was asked for ends this worker as it ended
        (``crash``), as the trials' runner does. Returns every call's milliseconds in order, and the last
        one's set, what it left and name; None where none is made. Why: on two H200s of one host
        (session 26) honest candidates' first calls came in bursts of other processes' work 0.17-0.5 s
        long from the trials' start, both first visits 4-11 times the median (docs/executor.md). A memo
        cannot answer values it has never seen, so each confirming call does the work and the rule
        still refuses it; honest code's confirming call runs at its median's speed once the burst is
        over."""
        if not self.job.options.repeat_confirm or not seeds:
            return None
        in_runner = isinstance(candidate, RunnerFunctionRuntime)
        if not isinstance(candidate, FunctionRuntime) or (
            not in_runner and (not candidate.confirms or self.confirm_buffers is None)
        ):
            return None
        rule = self._repeat_rule(candidate, stats, samples, sets)
        if rule is None or _within_repeat_rule(rule[0], rule[1], rule[2], stats):
            return None
        _, allowance, limit = rule
        t0 = time.perf_counter()
        times: list[float] = []
        made: tuple[InputSet, InputSet, str] | None = None
        # Three only in a runner, each in a process of its own that has seen nothing. In the worker's
        # process the calls would share one set of buffers, whose address the second call would have
        # seen: one call there, as before session 40.
        for k, seed in enumerate(seeds[: REPEAT_CONFIRM_CALLS if in_runner else 1]):
            if made is not None:  # the one before, not within the bound (its check: in the span too)
                self.check_confirmation(candidate, *made, seconds="repeat_confirm_early_checks")
            call = CONFIRMING_CALL if k == 0 else f"confirming call {k + 1} on a fresh set after the trials"
            # Drawn before a fresh runner starts: the confirming call follows its warm-up at once
            # (review 39b's L1), and the set reaches the runner only with the call's request.
            fresh = generate_inputs(self.task, "timing", seed, self.reference_lib)
            if isinstance(candidate, RunnerFunctionRuntime):
                warm = self.warm_source if self.warm_source is not None else self.timing_sources[0]
                t1 = time.perf_counter()
                try:
                    # As many warm-up calls as the trials make (at least 2: an autotuner's first calls
                    # at a size are slower, review 39b's L1); bounded by the option's own limit (50).
                    warmups = max(self.job.options.warmup, REPEAT_CONFIRM_WARMUPS)
                    confirming = candidate.confirming_runtime(warm, warmups)
                except CandidateFailed as e:  # fail closed: no more confirmation, the rule judges
                    logger.warning("no confirming call: its process could not be started or warmed up: %s", e)
                    self.seconds["repeat_confirm_unmade"] = 1.0
                    break
                finally:
                    self._add_seconds("repeat_confirm_process", t1)
                try:
                    ms, work = confirming.first_visit(fresh, call)  # its runner killed at the call's ack
                finally:  # review 39b's L3: no fresh runner, and none of its mappings, outlives the call
                    confirming.close()
            else:
                ms, work = candidate.first_visit(fresh, call, self.confirm_buffers)
            times.append(ms)
            made = fresh, work, call
            self.seconds["repeat_confirm_calls"] = float(k + 1)
            self.seconds["repeat_confirm_call"] = ms / 1e3
            if _within_repeat_rule(ms, allowance, limit, stats):
                break
        self._add_seconds("repeat_confirm", t0)
        if made is None:
            return None
        return times, *made

    def confirm_clock(
        self, candidate: Runtime, stats: TimingStats, last: dict[str, Any], sets: int, seeds: list[int]
    ) -> tuple[InputSet, InputSet, str] | None:
        """Where the executor's clock check would refuse a function candidate's timed calls
        (:func:`executor.clockcheck.timed_refusal`, judged here on this process's clock around each
        call's announcement, whose window holds the executor's): up to
        :data:`~executor.clockcheck.CLOCK_CONFIRM_CALLS` clock-confirming calls, right after the trials
        and under their locks, each a first visit (:meth:`FunctionRuntime.first_visit`) on a set drawn
        now at the timing size from the next of ``seeds`` (the executor's, distinct:
        :attr:`CandidateRun.clock_confirm_seeds`), stopping at the first whose window here is within
        the bound. Every one is checked (:meth:`check_confirmation`): each but the last here, under the
        locks, before the next is made (one set and its copy held at a time), and the last, whose
        set, what it left and name are returned, once the GPU is released; the executor
        judges the last one's window on its own clock. None where none is made (no seeds: none). Why:
        on a loaded host the worker is kept off its core between its writes, and the first visits' windows grow past the rule's slack
        (an honest 3 ms saxpy's two were 24 and 32 ms under a load of 7 on 2 cores); a changed clock
        cannot shorten the executor's window of a call whose values no memo has seen, and a candidate
        that makes its windows look short here only skips the confirmation. The seeds are not this
        process's entropy: a candidate that patched libc's ``getrandom`` made every set here the same,
        computed the first and answered the last from a memo (review 36c, H1)."""
        windows = last.get("windows_s")
        samples = last.get("samples_ms")
        if not isinstance(candidate, FunctionRuntime) or not candidate.confirms or not windows or not samples:
            return None
        # The executor adds the same allowance for the copy to its bound, from the same figures (the
        # job's, measured by the executor; none where this process measured its own).
        allowance_ms, _ = copy_allowance(self.task, self.job.device_peak)
        refusal = timed_refusal(windows, samples[:sets], stats.median_ms, allowance_ms)
        if refusal is None:
            return None
        bound_ms = refusal[1]
        t0 = time.perf_counter()
        made: tuple[InputSet, InputSet, str] | None = None
        for k, seed in enumerate(seeds[:CLOCK_CONFIRM_CALLS]):
            if made is not None:  # the one before, not within the bound here (its check: in the span too)
                self.check_confirmation(candidate, *made, seconds="clock_confirm_early_checks")
            self.seconds["clock_confirm_calls"] = float(k + 1)
            fresh = generate_inputs(self.task, "timing", seed, self.reference_lib)
            call = f"{CLOCK_CONFIRM_CALL}{k + 1} on a fresh set after the trials"
            _, work = candidate.first_visit(fresh, call, self.confirm_buffers)
            made = fresh, work, call
            window = candidate.watch.window_s
            if window is not None and window * 1e3 <= bound_ms:
                break
        self._add_seconds("clock_confirm", t0)
        return made

    def check_confirmation(
        self,
        candidate: Runtime,
        fresh: InputSet,
        work: InputSet,
        call: str = CONFIRMING_CALL,
        seconds: str = "repeat_confirm",
    ) -> None:
        """A confirming call's ``in`` arrays (unchanged, bit for bit) and outputs against the
        reference's on its set (run here, now that the candidate has run on it): a confirming call that
        changed its input or answers wrong is ``wrong_output``. ``call``: its name (the repeat-visit rule's, or a clock-confirming
        call's: :meth:`confirm_clock`), ``seconds``: where the time of the check is added."""
        assert isinstance(candidate, FunctionRuntime)
        candidate.check_inputs(fresh, work, call)
        t0 = time.perf_counter()
        reference = fresh.copy()
        call_entry(self.reference_fn, self.task, reference.scalars, reference.arrays)
        expected = {a.name: reference.arrays[a.name] for a in self.task.outputs}
        check_reference_outputs(self.task, expected)
        try:
            self.check(fresh, {a.name: work.arrays[a.name] for a in self.task.outputs}, expected)
        except CandidateFailed as e:
            raise CandidateFailed(e.kind, f"{call}: {e}", e.mismatch) from e
        finally:
            self._add_seconds(seconds, t0)

    def check_repeats(
        self,
        candidate: Runtime,
        stats: TimingStats,
        samples: list[float] | None,
        sets: int,
        confirmed_ms: list[float] | None = None,
    ) -> None:
        """The first visits against the median (option ``repeat_gain_limit``). Trial ``k < sets`` is
        the first call on timing set ``k``, whose values the candidate has never seen (the correctness
        calls draw their own, the warm-up has a set of its own); the median is a repeat visit. Honest
        code does the same work on both; a candidate that remembers every answer does it on the
        first visits only, and on a compute-bound task the floor (which counts bytes) cannot see that.
        A first visit may also be slower for an honest reason: its data come from memory where a
        repeat's may come from a cache. That much is taken off first: twice the time the task's bytes
        take at the memory's measured bandwidth (the device's for a kernel task, whose trials flush L2
        anyway; the host's for a function task), and for a function task, timed on the host clock,
        :data:`REPEAT_HOST_SLACK_MS` more. ``confirmed_ms``: the confirming calls' times, in order
        (:meth:`confirm_first_visit`), first visits too, which count with the others."""
        rule = self._repeat_rule(candidate, stats, samples, sets)
        if rule is None:
            return
        first, allowance, limit = rule
        fastest = min([first, *(confirmed_ms or [])])
        if not _within_repeat_rule(fastest, allowance, limit, stats):
            confirmed = ""
            if confirmed_ms and len(confirmed_ms) == 1:
                confirmed = f"; {CONFIRMING_CALL} took {confirmed_ms[0]:.4g} ms"
            elif confirmed_ms:
                took = ", ".join(f"{ms:.4g}" for ms in confirmed_ms)
                confirmed = f"; the {len(confirmed_ms)} confirming calls on fresh sets after the trials took {took} ms"
            raise CandidateFailed(
                ErrorKind.IMPLAUSIBLE,
                f"the median timed call ({stats.median_ms:.4g} ms) ran {fastest / stats.median_ms:.3g} times "
                f"faster than the fastest first call on a timing set ({first:.4g} ms{confirmed}; "
                f"{allowance:.4g} ms of it allowed for caches, limit {limit:g}x): the calls that repeated a "
                "set's values were answered from what earlier calls computed, not by doing the task's work",
            )

    def _check_expected_ahead(self) -> dict[str, timingset.StatKey]:
        """The digests of the timing sets' stored reference outputs, checked here while the candidate
        compiles rather than after the trials under the GPU lock. The outputs themselves are still
        read only after the trials: the check keeps none of them in this process."""
        spec = self.job.timing_set
        if spec is None:
            return {}
        t0 = time.perf_counter()
        checked: dict[str, timingset.StatKey] = {}
        for variant in timingset.variants(spec, self.job.options.timing_sets):
            checked.update(timingset.expected_checked(variant, self.task))
        self._add_seconds("expected_check", t0)
        return checked

    def timing_expected(self, source: int) -> dict[str, np.ndarray]:
        """The reference's outputs for timing source ``source``, read after the trials: from the task's
        timing set, else (not stored, or pruned meanwhile) from the reference run here, now that the
        candidate has run."""
        spec = self.job.timing_set
        if spec is None and source < len(self.timing_indices):
            return self.expected(self.timing_indices[source])
        if spec is not None:
            t0 = time.perf_counter()
            stored = timingset.load_expected(
                timingset.variants(spec, source + 1)[source], self.task, self.expected_checked
            )
            if stored is not None:
                self._add_seconds("expected_load", t0)
                return stored
        work = self.timing_sources[source].copy()
        call_entry(self.reference_fn, self.task, work.scalars, work.arrays)
        outputs = {a.name: work.arrays[a.name] for a in self.task.outputs}
        check_reference_outputs(self.task, outputs)
        return outputs

    def outcome(
        self, failure: CandidateFailed, stage: Literal["correctness", "timing"], checked: int, device: str
    ) -> WorkerOutcome:
        """A failed outcome from a CandidateFailed signal."""
        return WorkerOutcome(
            passed=False,
            stage=stage,
            error=failure.kind,
            message=str(failure),
            mismatch=failure.mismatch,
            input_sets_checked=checked,
            device=device,
            seconds=self.seconds,
            floor=self.floor,
        )
