"""The isolated worker: runs a candidate's runtime stages (or a task's reference) in its own process.

Started by :mod:`executor.sandbox` as ``python -m executor.worker serve ROLE RUNTIME`` in a new process
group. A worker does its start-up first (imports; for a GPU candidate worker also the CUDA context and
the L2-flush buffer), then reads job files named on its stdin, one job per process:

* role ``reference``: one line, a :class:`ReferenceJob`. It generates the evaluation's input sets, runs
  the task's serial reference on them, writes the expected outputs as ``.npy`` files, stores the
  task's timing set with its outputs when it is not stored yet (:mod:`executor.timingset`), times the
  reference when asked, writes a :class:`ReferenceOutcome` and exits.
* role ``candidate``: a first line names a :class:`WorkerJob` (task, seeds, options); the worker
  generates the same input sets while the candidate is still compiling, loads (or draws) the task's
  timing set and makes the rotated copies the trials run on (on the device, for kernel tasks). A
  second line names a :class:`CandidateRun` (the compiled product); the worker checks correctness,
  times, writes a :class:`WorkerOutcome` and exits. An empty line or end of input instead of the
  second line cancels.

Each candidate gets a fresh process, so a crash, hang, runaway allocation or sticky CUDA error costs
only that process; the parent turns its fate into a verdict. The expected outputs of an input set are
read from the reference's files only after the candidate has produced its own outputs for that set,
so the candidate never runs while the answer to its current inputs is in its process.

Two runtimes share the same flow:

* ``gpu``: pycuda with the device's primary context; function-task candidates are .so files called
  through ctypes on host pointers and timed one call at a time on the host clock; kernel-task
  candidates are cubins launched here and timed with CUDA events, in batches of trials enqueued on a
  stream with one wait per batch.
* ``host``: function-task .so files called on the CPU. No CUDA is involved; it exists to exercise the
  isolation and checking machinery on machines without a GPU, and is never used to pass a candidate
  in the service unless explicitly enabled.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from executor import timingset
from executor.abi import bind_entry, call_entry
from executor.checking import compare_output, measure, measure_batched, timing_stats
from executor.checking import prime as prime_statistics
from executor.devcompare import DeviceComparer
from executor.errors import ExecutorError
from executor.gpulock import gpu_exclusive
from executor.inputs import InputSet, generate_inputs
from executor.protocol import EvaluationOptions
from executor.reference import check_reference_outputs
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask, ScalarArg, Size, Task
from executor.timingset import TimingSetSpec
from executor.verdict import ErrorKind, Mismatch, TimingStats

logger = logging.getLogger(__name__)


def input_plan(options: EvaluationOptions, seeds: list[int]) -> list[tuple[int, Size]]:
    """The evaluation's input sets as ``(seed, size)``: the test-size sets, then the timing-size sets.

    There is always at least one timing-size set: it is what the trials run on and what the last trial
    is checked against, even when ``timing_size_checks`` is 0.
    """
    test: list[Size] = ["test"] * options.correctness_sets
    timing: list[Size] = ["timing"] * max(1, options.timing_size_checks)
    sizes = test + timing
    if len(seeds) < len(sizes):
        raise ValueError(f"{len(seeds)} seeds for {len(sizes)} input sets")
    return list(zip(seeds, sizes, strict=False))


def seeds_needed(options: EvaluationOptions) -> int:
    """How many fresh seeds an evaluation with these options draws."""
    return options.correctness_sets + max(1, options.timing_size_checks)


def expected_path(directory: Path, index: int, name: str) -> Path:
    """Where the reference's output ``name`` for input set ``index`` is stored."""
    return directory / f"set{index}-{name}.npy"


class WorkerJob(BaseModel):
    """The candidate-independent part of a worker's job, sent before the candidate is compiled."""

    task: Task
    runtime: Literal["gpu", "host", "none"]
    reference_library: str
    seeds: list[int]
    options: EvaluationOptions = EvaluationOptions()
    expected_dir: str | None = Field(
        default=None,
        description="the reference's outputs (from a ReferenceJob); None: run the reference here, "
        "after the candidate on each set",
    )
    timing_set: TimingSetSpec | None = Field(
        default=None,
        description="the task's timing set, which the trials run on; None: the fresh timing-size sets",
    )
    compare_product: str | None = Field(
        default=None,
        description="the cubin of executor.devcompare's kernels (kernel tasks); None: every output is "
        "compared on the host",
    )
    result_path: str = "result.json"
    memory_limit_bytes: int | None = None
    progress_path: str | None = None


class CandidateRun(BaseModel):
    """The second half of a candidate worker's job: what to run, once it is compiled."""

    candidate_product: str
    candidate_symbol: str
    baseline_product: str | None = None
    reference_timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    sent_at: float | None = Field(
        default=None,
        description="time.monotonic() when the parent handed this over: the worker reports how long "
        "the candidate then waited for the worker's preparation (``inputs_wait``)",
    )


class ReferenceJob(BaseModel):
    """A reference worker's job: expected outputs for the evaluation's input sets, and its timing."""

    task: Task
    reference_library: str
    seeds: list[int]
    options: EvaluationOptions = EvaluationOptions()
    sets: int | None = Field(default=None, description="only the first N planned sets (None: all)")
    out_dir: str
    time_reference: bool = False
    timing_set: TimingSetSpec | None = Field(
        default=None, description="store the task's timing set and its outputs here unless stored"
    )
    result_path: str = "result.json"
    memory_limit_bytes: int | None = None
    progress_path: str | None = None


class ReferenceOutcome(BaseModel):
    """What a reference worker reports: done (files written) or the task's own failure."""

    ok: bool
    message: str = ""
    reference_timing: TimingStats | None = None
    seconds: dict[str, float] = Field(default_factory=dict)


class WorkerOutcome(BaseModel):
    """What the worker reports back (the parent adds compile info and wraps it in a Verdict)."""

    passed: bool
    stage: Literal["correctness", "timing"]
    error: ErrorKind | None = None
    message: str = ""
    mismatch: Mismatch | None = None
    input_sets_checked: int = 0
    candidate_timing: TimingStats | None = None
    reference_timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    device: str = ""
    seconds: dict[str, float] = Field(default_factory=dict)


class CandidateFailed(Exception):
    """Raised inside the worker when a check fails; carries the outcome fields."""

    def __init__(self, kind: ErrorKind, message: str, mismatch: Mismatch | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.mismatch = mismatch


# --- runtimes -------------------------------------------------------------------------------------------

# Trials enqueued on the stream before the host waits: 6 stream operations each stay well inside the
# driver's launch queue, and the stopping rule is applied between batches.
MAX_BATCH = 64


class HostSlots:
    """Rotated host copies of the timing sources (function tasks), made before the candidate arrives.

    Distinct copies per rotation slot, so that no trial finds its inputs in the CPU caches.
    """

    def __init__(self, sources: list[InputSet], rotate: int) -> None:
        self.sources = sources
        self.rotated = [sources[j % len(sources)].copy() for j in range(rotate)]


class Runtime:
    """Runs one callable (candidate or baseline) on an input set and times it."""

    device = "host-cpu"

    def run(self, inputs: InputSet, uploaded: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Call on a copy of ``inputs`` (``uploaded``: a device copy of it made ahead, used once, by
        the kernel runtime); return the output arrays."""
        raise NotImplementedError

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        """Timing statistics over trials on the rotated copies in ``slots`` (:class:`HostSlots` or
        :class:`DeviceSlots`), and what the last trial left for a final check: the index of its source
        set (``set``) and its outputs, as host arrays (``outputs``) or, for kernels, as the device
        buffers of its rotation slot (``device_outputs``)."""
        raise NotImplementedError


class FunctionRuntime(Runtime):
    """A function-task .so called on host pointers; the GPU and host variants differ in two hooks."""

    def __init__(self, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        self.task = task
        self.fn = bind_entry(ctypes.CDLL(product), symbol, task)

    def before_trial(self) -> None:
        """Untimed preparation of the device before a timed call."""

    def after_call(self) -> None:
        """Wait for the call's work to finish (part of the timed region)."""

    def run(self, inputs: InputSet, uploaded: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        work = inputs.copy()
        call_entry(self.fn, self.task, work.scalars, work.arrays)
        self.after_call()
        return {a.name: work.arrays[a.name] for a in self.task.outputs}

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        assert isinstance(slots, HostSlots)
        sources, rotated = slots.sources, slots.rotated
        outputs = [a.name for a in self.task.outputs]
        last: dict[str, Any] = {}

        def trial(i: int) -> float:
            j = i % len(rotated)
            work, source = rotated[j], sources[j % len(sources)]
            for name in outputs:  # restore inout and re-poison out (untimed)
                np.copyto(work.arrays[name], source.arrays[name])
            self.before_trial()
            start = time.perf_counter()
            call_entry(self.fn, self.task, work.scalars, work.arrays)
            self.after_call()
            elapsed = (time.perf_counter() - start) * 1e3
            last.update(set=j % len(sources), outputs={name: work.arrays[name] for name in outputs})
            return elapsed

        # One call at a time: each is timed on the host clock around the call and its synchronisation.
        samples, stop = measure(trial, options.trial_policy())
        return timing_stats(samples, stop), last


class HostFunctionRuntime(FunctionRuntime):
    """A function-task .so called on host memory (no GPU)."""


class GpuContext:
    """The device's primary context through pycuda, shared with the CUDA runtime inside candidates."""

    def __init__(self) -> None:
        import pycuda.driver as cuda  # lazily: only the GPU path needs pycuda

        cuda.init()
        self.cuda = cuda
        self.dev = cuda.Device(0)
        self.ctx = self.dev.retain_primary_context()
        self.ctx.push()
        major, minor = self.dev.compute_capability()
        self.device = f"{self.dev.name()} (sm_{major}{minor})"
        l2 = int(self.dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE))
        # Writing more than the L2 holds between trials evicts whatever the last trial left there.
        self.flush_bytes = max(4 * l2, 64 << 20)
        self.flush_buffer = cuda.mem_alloc(self.flush_bytes)

    @staticmethod
    def create_or_none() -> GpuContext | None:
        """A context made ahead of the job (a pre-warmed worker); None when that fails, in which case
        the job makes it again and the failure shows in its verdict."""
        try:
            import pycuda.driver as cuda
        except ImportError:
            return None
        try:
            return GpuContext()
        except cuda.Error as e:
            logger.warning("no CUDA context ahead of the job: %s", e)
            return None

    def flush_l2(self) -> None:
        """Overwrite a buffer larger than L2 and wait for it."""
        self.cuda.memset_d32(self.flush_buffer, 0x5A5A5A5A, self.flush_bytes // 4)
        self.cuda.Context.synchronize()

    def flush_l2_async(self, stream: Any) -> None:
        """Enqueue the same overwrite on ``stream`` (ordered before whatever is enqueued after it)."""
        self.cuda.memset_d32_async(self.flush_buffer, 0x5A5A5A5A, self.flush_bytes // 4, stream)

    def synchronize(self) -> None:
        """Wait for all work on the device; a sticky error surfaces here as a CUDA error."""
        try:
            self.cuda.Context.synchronize()
        except self.cuda.Error as e:
            raise CandidateFailed(ErrorKind.CUDA_ERROR, f"CUDA error after the call: {e}") from e

    def upload(self, inputs: InputSet, names: list[str] | None = None) -> dict[str, Any]:
        """Device copies of the arrays of ``inputs`` (all, or those in ``names``)."""
        buffers = {}
        for name, array in inputs.arrays.items():
            if names is not None and name not in names:
                continue
            buf = self.cuda.mem_alloc(max(array.nbytes, 1))
            self.cuda.memcpy_htod(buf, array)  # outputs carry their poison, inout their initial values
            buffers[name] = buf
        return buffers

    def close(self) -> None:
        """Release the context (best effort: a broken context cannot be popped cleanly)."""
        try:
            self.flush_buffer.free()
            self.ctx.pop()
        except self.cuda.Error as e:
            logger.warning("could not release the CUDA context: %s", e)


class DeviceSlots:
    """Rotated device copies of the timing sources (kernel tasks), so that no trial finds its data
    already in L2, and one pristine device copy of each source's outputs to restore them from before
    every trial (a device-to-device copy: a host upload of a large output would dominate each trial).

    Made before the candidate arrives: nothing in it depends on the candidate.
    """

    def __init__(
        self, gpu: GpuContext, task: FunctionTask | KernelTask, sources: list[InputSet], rotate: int
    ):
        self.gpu = gpu
        self.sources = sources
        self.outputs = [a.name for a in task.outputs]
        self.nbytes = [{name: max(s.arrays[name].nbytes, 1) for name in self.outputs} for s in sources]
        self.rotated: list[dict[str, Any]] = []
        self.pristine: list[dict[str, Any]] = []
        try:
            self.pristine.extend(gpu.upload(s, self.outputs) for s in sources)
            self.rotated.extend(gpu.upload(sources[j % len(sources)]) for j in range(rotate))
        except gpu.cuda.MemoryError as e:
            self.free()
            raise CandidateFailed(ErrorKind.OUT_OF_MEMORY, f"rotated timing buffers do not fit: {e}") from e

    def enqueue_restore(self, slot: int, source: int, stream: Any) -> None:
        """Restore inout / re-poison out of rotation slot ``slot`` from source ``source`` (untimed)."""
        for name in self.outputs:
            self.gpu.cuda.memcpy_dtod_async(
                self.rotated[slot][name], self.pristine[source][name], self.nbytes[source][name], stream
            )

    def free(self) -> None:
        """Free every buffer (the process's exit would too)."""
        for buffers in self.rotated + self.pristine:
            for buf in buffers.values():
                buf.free()
        self.rotated, self.pristine = [], []


def make_slots(
    task: FunctionTask | KernelTask, gpu: GpuContext | None, sources: list[InputSet], rotate: int
) -> HostSlots | DeviceSlots:
    """The rotated copies that a runtime's trials run on: on the device for kernel tasks (``gpu`` is
    required), in host memory for function tasks."""
    if isinstance(task, KernelTask):
        if gpu is None:
            raise ExecutorError("a kernel task's timing buffers need a CUDA context")
        return DeviceSlots(gpu, task, sources, rotate)
    return HostSlots(sources, rotate)


class GpuFunctionRuntime(FunctionRuntime):
    """A function-task .so (host pointers in, host pointers out) timed on the GPU host.

    The call allocates, copies and launches by itself, possibly on other streams, so the timed region
    is the call plus a device-wide synchronisation, measured with the host clock.
    """

    def __init__(self, gpu: GpuContext, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        super().__init__(task, product, symbol)
        self.gpu = gpu
        self.device = gpu.device

    def before_trial(self) -> None:
        self.gpu.flush_l2()

    def after_call(self) -> None:
        self.gpu.synchronize()


class GpuKernelRuntime(Runtime):
    """A kernel-task cubin: device buffers allocated here, inputs copied, outputs poisoned, launched
    with the task's grid/block; timed with CUDA events on a stream of its own."""

    def __init__(self, gpu: GpuContext, task: KernelTask, product: str, symbol: str) -> None:
        self.gpu = gpu
        self.device = gpu.device
        self.task = task
        self.module = gpu.cuda.module_from_file(product)
        self.kernel = self.module.get_function(symbol)

    def _launch(self, inputs: InputSet, buffers: dict[str, Any], size: Size, stream: Any = None) -> None:
        grid, block, shared = self.task.launch_config(size)
        args: list[Any] = []
        for arg in self.task.args:
            if isinstance(arg, ScalarArg):
                args.append(NUMPY_DTYPES[arg.dtype](inputs.scalars[arg.name]))
            else:
                args.append(buffers[arg.name])
        try:
            self.kernel(*args, block=block, grid=grid, shared=shared, stream=stream)
        except self.gpu.cuda.Error as e:
            raise CandidateFailed(ErrorKind.CUDA_ERROR, f"kernel launch failed: {e}") from e

    def download(self, inputs: InputSet, buffers: dict[str, Any]) -> dict[str, np.ndarray]:
        """Host copies of the outputs in ``buffers`` (shaped like those of ``inputs``)."""
        outputs = {}
        for arg in self.task.outputs:
            host = np.empty_like(inputs.arrays[arg.name])
            self.gpu.cuda.memcpy_dtoh(host, buffers[arg.name])
            outputs[arg.name] = host
        return outputs

    @staticmethod
    def free(buffers: dict[str, Any]) -> None:
        """Free device buffers."""
        for buf in buffers.values():
            buf.free()

    def run_on_device(self, inputs: InputSet, uploaded: dict[str, Any] | None = None) -> dict[str, Any]:
        """Launch on ``inputs`` (uploaded now unless ``uploaded``) and wait; the outputs' device buffers
        are returned and the caller frees them, the other buffers are freed here."""
        buffers = uploaded
        if buffers is None:
            try:
                buffers = self.gpu.upload(inputs)
            except self.gpu.cuda.MemoryError as e:
                raise CandidateFailed(ErrorKind.OUT_OF_MEMORY, f"task buffers do not fit: {e}") from e
        try:
            self._launch(inputs, buffers, inputs.size)
            self.gpu.synchronize()
        except BaseException:
            self.free(buffers)
            raise
        outputs = {arg.name: buffers.pop(arg.name) for arg in self.task.outputs}
        self.free(buffers)
        return outputs

    def run(self, inputs: InputSet, uploaded: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        outputs = self.run_on_device(inputs, uploaded)
        try:
            return self.download(inputs, outputs)
        finally:
            self.free(outputs)

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        """Trials enqueued in batches on one stream, each ``restore outputs -> flush L2 -> start event ->
        launch -> end event``, with one wait per batch: a sample is still one launch after a flush,
        timed by its own pair of events, without a host round trip per trial."""
        assert isinstance(slots, DeviceSlots)
        cuda = self.gpu.cuda
        stream = cuda.Stream()
        events: list[tuple[Any, Any]] = []  # reused by every batch
        last: dict[str, Any] = {}

        def run_batch(indices: list[int]) -> list[float]:
            try:
                while len(events) < len(indices):
                    events.append((cuda.Event(), cuda.Event()))
                for (start, end), i in zip(events, indices, strict=False):
                    j = i % len(slots.rotated)
                    k = j % len(slots.sources)
                    slots.enqueue_restore(j, k, stream)
                    self.gpu.flush_l2_async(stream)
                    start.record(stream)
                    self._launch(slots.sources[k], slots.rotated[j], slots.sources[k].size, stream)
                    end.record(stream)
                    last.update(set=k, slot=j)
                events[len(indices) - 1][1].synchronize()
                # A fault in any launch of the batch is sticky: it surfaces here, if not before.
                cuda.Context.synchronize()
                return [float(start.time_till(end)) for start, end in events[: len(indices)]]
            except cuda.Error as e:
                raise CandidateFailed(ErrorKind.CUDA_ERROR, f"CUDA error while timing: {e}") from e

        warmup: dict[str, Any] = {}
        policy = options.trial_policy(device_timed=True)
        samples, stop = measure_batched(run_batch, policy, MAX_BATCH, warmup)
        last["warmup"] = warmup  # calls, seconds, batches
        last["samples_ms"] = samples  # for bench/device/warmup_trace.py
        # The last trial's outputs stay where it wrote them: the worker checks them there.
        last["device_outputs"] = {a.name: slots.rotated[last["slot"]][a.name] for a in self.task.outputs}
        return timing_stats(samples, stop, warmup["calls"]), last


# --- the flows ------------------------------------------------------------------------------------------


def _progress(path: str | None, stage: str) -> None:
    if path:
        Path(path).write_text(stage)


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
        _progress(self.job.progress_path, "reference")
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
            if not timingset.stored(spec):
                _progress(self.job.progress_path, "timing_set")
                t1 = time.perf_counter()
                fixed = generate_inputs(self.task, "timing", spec.seed, self.lib)
                timingset.store(spec, self.task, fixed, self.call(fixed))
                self.seconds["timing_set"] = time.perf_counter() - t1
            if self.job.time_reference:
                fixed = fixed or timingset.load_inputs(spec, self.task)
                timing_inputs = fixed or generate_inputs(self.task, "timing", spec.seed, self.lib)
        stats = None
        if self.job.time_reference and timing_inputs is not None:
            _progress(self.job.progress_path, "reference_timing")
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


class Worker:
    """Runs one candidate job's runtime stages."""

    def __init__(self, job: WorkerJob, gpu: GpuContext | None = None) -> None:
        self.job = job
        self.task = job.task
        self.reference_lib = ctypes.CDLL(job.reference_library)
        self.reference_fn = bind_entry(self.reference_lib, self.task.reference_symbol, self.task)
        self.gpu = gpu
        self.seconds: dict[str, float] = {}
        self.plan = input_plan(job.options, job.seeds)
        self.sets: list[InputSet] = []
        self._expected: dict[int, dict[str, np.ndarray]] = {}
        # The fresh timing-size sets' positions in the plan, and what the trials run on.
        self.timing_indices = [i for i, (_, size) in enumerate(self.plan) if size == "timing"]
        self.timing_sources: list[InputSet] = []
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

    def _add_seconds(self, key: str, since: float) -> None:
        """Add the time since ``since`` (a perf_counter reading) to ``seconds[key]``."""
        self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - since

    def progress(self, stage: str) -> None:
        """Record the current stage, so that a timeout can say where it happened."""
        _progress(self.job.progress_path, stage)

    def prepare(self) -> None:
        """Everything that does not depend on the candidate, done while it compiles: every planned
        input set, the sets the trials run on and their rotated copies (on the device for kernel
        tasks, where the CUDA context is already made)."""
        t0 = time.perf_counter()
        self.progress("inputs")
        self.sets = [generate_inputs(self.task, size, seed, self.reference_lib) for seed, size in self.plan]
        self.seconds["inputs"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        if self.job.options.run_timing:
            self.timing_sources = self._timing_sources()
            # Device uploads wait for (and never overlap) another worker's run.
            with gpu_exclusive():
                self.slots = self._prepared_slots()
                if isinstance(self.slots, DeviceSlots):
                    self.uploaded = self._uploaded_timing_sets()
                    self.comparer = self._comparer()
        self.seconds["timing_inputs"] = time.perf_counter() - t1
        self.ready_at = time.monotonic()

    def _uploaded_timing_sets(self) -> dict[int, dict[str, Any]]:
        """Device copies of the fresh timing-size sets for their correctness runs (uploading hundreds
        of MB from pageable memory would otherwise wait for the candidate). Empty when they do not
        fit: then each run uploads its set itself."""
        assert self.gpu is not None
        uploaded: dict[int, dict[str, Any]] = {}
        try:
            for index in self.timing_indices:
                uploaded[index] = self.gpu.upload(self.sets[index])
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
        spec = self.job.timing_set
        if spec is None:
            return [self.sets[i] for i in self.timing_indices]
        loaded = timingset.load_inputs(spec, self.task)
        # Not stored yet (the task's first evaluation): drawn here from the same seed, as the
        # reference worker does; generation is deterministic for a seed.
        return [loaded or generate_inputs(self.task, "timing", spec.seed, self.reference_lib)]

    def _prepared_slots(self) -> HostSlots | DeviceSlots | None:
        """The rotated copies made ahead; None when that fails, in which case the timing stage makes
        them again and the failure (no device memory, no context) becomes the candidate's verdict."""
        if isinstance(self.task, KernelTask) and self.gpu is None:
            if self.job.runtime != "gpu":
                return None
            self.gpu = GpuContext.create_or_none()
            if self.gpu is None:
                return None
        errors: tuple[type[BaseException], ...] = (CandidateFailed, ExecutorError)
        if self.gpu is not None:
            errors = (*errors, self.gpu.cuda.Error)
        try:
            return make_slots(self.task, self.gpu, self.timing_sources, self.job.options.rotate_buffers)
        except errors as e:
            logger.warning("no timing buffers ahead of the candidate: %s", e)
            return None

    def runtime_for(self, product: str, symbol: str) -> Runtime:
        """The runtime that fits the job (GPU function/kernel, or host function)."""
        if self.job.runtime == "host":
            return HostFunctionRuntime(self.task, product, symbol)
        if self.gpu is None:
            self.gpu = GpuContext()
        if isinstance(self.task, KernelTask):
            return GpuKernelRuntime(self.gpu, self.task, product, symbol)
        return GpuFunctionRuntime(self.gpu, self.task, product, symbol)

    def expected(self, index: int) -> dict[str, np.ndarray]:
        """The reference's outputs for planned set ``index``: called only after the candidate has run
        on that set, so the answer is never in this process while the candidate computes it."""
        if index not in self._expected:
            if self.job.expected_dir is not None:
                t0 = time.perf_counter()
                directory = Path(self.job.expected_dir)
                self._expected[index] = {
                    a.name: np.load(expected_path(directory, index, a.name), allow_pickle=False)
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

    def run(self, run: CandidateRun) -> WorkerOutcome:
        """Correctness on fresh input sets, then timing; failures come back as outcomes."""
        opts = self.job.options
        if not self.sets:
            self.prepare()
        if run.sent_at is not None and self.ready_at is not None:
            # The part of the preparation that the candidate had to wait for (both clocks are the
            # system's monotonic clock).
            self.seconds["inputs_wait"] = max(0.0, self.ready_at - run.sent_at)
        t0 = time.perf_counter()
        self.progress("correctness")
        candidate = self.runtime_for(run.candidate_product, run.candidate_symbol)
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
                if overlap and inputs.size == "timing" and self.comparer is not None:
                    # Left on the device and checked there after the trials (no download).
                    assert isinstance(candidate, GpuKernelRuntime)
                    self.check_later(index, candidate, candidate.run_on_device(inputs, uploaded))
                elif overlap and inputs.size == "timing":
                    self.check_behind(index, candidate.run(inputs, uploaded))
                else:
                    self.check(inputs, candidate.run(inputs, uploaded), self.expected(index))
                done += 1
            # Repeat the first set: a race that happened to pass once should not pass twice by luck.
            try:
                self.check(self.sets[0], candidate.run(self.sets[0]), self.expected(0))
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
        return self.timing(candidate, run, done)

    def timing(self, candidate: Runtime, run: CandidateRun, checked: int) -> WorkerOutcome:
        """Time candidate, serial reference and (optionally) the naive CUDA baseline at the timing size.

        The trials run on rotated copies of the task's timing set (or of the fresh timing-size sets),
        whose reference outputs are known, so the last trial's outputs are checked without running the
        serial reference again.
        """
        opts = self.job.options
        t0 = time.perf_counter()
        self.progress("timing")
        if not self.timing_sources:
            self.timing_sources = self._timing_sources()
        sources = self.timing_sources
        try:
            slots = self.slots or make_slots(self.task, self.gpu, sources, opts.rotate_buffers)
            stats, last = candidate.time(slots, opts)
            self.seconds["timing_trials"] = time.perf_counter() - t0
            if "warmup" in last:  # kernel tasks: the part of the trials spent warming up
                self.seconds["timing_warmup"] = last["warmup"]["seconds"]
            failed_behind = self.behind_outcome(candidate.device)
            if failed_behind is not None:
                self.seconds["timing"] = time.perf_counter() - t0
                return failed_behind
            # The last timed trial's outputs must still be right: races and state kept across calls
            # that only show up under repetition are caught here.
            inputs, expected = sources[last["set"]], self.timing_expected(last["set"])
            if "device_outputs" in last:
                assert isinstance(candidate, GpuKernelRuntime)
                self.check_device_outputs(candidate, inputs, last["device_outputs"], expected)
            else:
                self.check(inputs, last["outputs"], expected)
        except CandidateFailed as e:
            self.seconds["timing"] = time.perf_counter() - t0
            # A correctness failure comes first.
            return self.behind_outcome(candidate.device, e) or self.outcome(
                e, "timing", checked, candidate.device
            )
        ref_stats = run.reference_timing
        if ref_stats is None:
            self.progress("reference_timing")
            ref_stats = time_reference(self.reference_fn, self.task, sources[0], opts.reference_repeats)
        baseline_stats = run.baseline_timing
        if baseline_stats is None and opts.baseline and run.baseline_product:
            self.progress("baseline")
            baseline = self.runtime_for(run.baseline_product, self.task.entry)
            # Copies of their own: the candidate may have written into its inputs.
            baseline_slots = make_slots(self.task, self.gpu, sources, opts.rotate_buffers)
            baseline_stats, _ = baseline.time(baseline_slots, opts)
        self.seconds["timing"] = time.perf_counter() - t0
        return WorkerOutcome(
            passed=True,
            stage="timing",
            input_sets_checked=checked + 1,
            candidate_timing=stats,
            reference_timing=ref_stats,
            baseline_timing=baseline_stats,
            device=candidate.device,
            seconds=self.seconds,
        )

    def timing_expected(self, source: int) -> dict[str, np.ndarray]:
        """The reference's outputs for timing source ``source``, read after the trials: from the task's
        timing set, else (not stored, or pruned meanwhile) from the reference run here, now that the
        candidate has run."""
        spec = self.job.timing_set
        if spec is None:
            return self.expected(self.timing_indices[source])
        t0 = time.perf_counter()
        stored = timingset.load_expected(spec, self.task)
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
        )


def _limit_memory(limit: int | None, uses_cuda: bool) -> None:
    # RLIMIT_AS breaks CUDA (the driver reserves huge virtual ranges), so on the GPU path the parent
    # watches resident memory instead; elsewhere the kernel enforces the limit here.
    if limit is not None and not uses_cuda:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# The descriptor of the pipe on which a worker tells its parent that its result is written (see
# executor.sandbox.WorkerProcess.wait); the parent names it in this variable.
DONE_FD_ENV = "REGRAPH_DONE_FD"


def _write_result(path: str, model: BaseModel) -> None:
    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(model.model_dump_json())
    os.replace(tmp, target)
    fd = os.environ.get(DONE_FD_ENV)
    if fd:
        try:  # the parent wakes up at once; without this it still finds the file, later
            os.write(int(fd), b"\n")
        except (OSError, ValueError) as e:
            logger.warning("could not tell the parent that the result is written: %s", e)


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
    _write_result(job.result_path, outcome)
    return 0


def serve_candidate(job_path: str, gpu: GpuContext | None) -> int:
    """Prepare a candidate job, wait for the compiled candidate, run it and write the outcome."""
    job = WorkerJob.model_validate_json(Path(job_path).read_text())
    _limit_memory(job.memory_limit_bytes, uses_cuda=job.runtime == "gpu")
    worker = Worker(job, gpu)
    try:
        try:
            worker.prepare()
            line = sys.stdin.readline().strip()
            if not line:  # cancelled (the candidate did not compile, or the parent is gone)
                return 0
            run = CandidateRun.model_validate_json(Path(line).read_text())
            with gpu_exclusive():
                outcome = worker.run(run)
        except ExecutorError as e:  # the task's own reference or generator failed, not the candidate
            outcome = _failure(ErrorKind.REFERENCE_ERROR, str(e), worker.seconds)
        except MemoryError as e:
            outcome = _failure(ErrorKind.OUT_OF_MEMORY, f"host memory exhausted: {e}", worker.seconds)
        # The result first: the parent kills this process as soon as it is there, so tearing down
        # the context would only delay the verdict.
        _write_result(job.result_path, outcome)
    finally:
        if worker.gpu is not None:
            worker.gpu.close()
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``python -m executor.worker serve {candidate|reference} {gpu|host|none}``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(argv) != 3 or argv[0] != "serve" or argv[1] not in ("candidate", "reference"):
        sys.stderr.write("usage: python -m executor.worker serve {candidate|reference} {gpu|host|none}\n")
        return 2
    role, runtime = argv[1], argv[2]
    # Start-up that every job needs is done before the job arrives: that is what a spare pre-warms.
    prime_statistics()
    gpu = None
    if role == "candidate" and runtime == "gpu":
        with gpu_exclusive():  # making a context during another worker's trials would disturb them
            gpu = GpuContext.create_or_none()
    job_path = sys.stdin.readline().strip()
    if not job_path:
        if gpu is not None:
            gpu.close()
        return 0
    if role == "reference":
        return serve_reference(job_path)
    return serve_candidate(job_path, gpu)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
