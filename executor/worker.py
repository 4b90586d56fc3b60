"""The isolated worker: runs a candidate's runtime stages (or a task's reference) in its own process.

Started by :mod:`executor.sandbox` as ``python -m executor.worker serve ROLE RUNTIME`` in a new process
group. A worker does its start-up first (imports; for a GPU candidate worker also the CUDA context and
the L2-flush buffer), then reads job files named on its stdin, one job per process:

* role ``reference``: one line, a :class:`ReferenceJob`. It generates the evaluation's input sets, runs
  the task's serial reference on them, writes the expected outputs as ``.npy`` files, times the
  reference when asked, writes a :class:`ReferenceOutcome` and exits.
* role ``candidate``: a first line names a :class:`WorkerJob` (task, seeds, options); the worker
  generates the same input sets while the candidate is still compiling. A second line names a
  :class:`CandidateRun` (the compiled product); the worker checks correctness, times, writes a
  :class:`WorkerOutcome` and exits. An empty line or end of input instead of the second line cancels.

Each candidate gets a fresh process, so a crash, hang, runaway allocation or sticky CUDA error costs
only that process; the parent turns its fate into a verdict. The expected outputs of an input set are
read from the reference's files only after the candidate has produced its own outputs for that set,
so the candidate never runs while the answer to its current inputs is in its process.

Two runtimes share the same flow:

* ``gpu``: pycuda with the device's primary context; function-task candidates are .so files called
  through ctypes on host pointers, kernel-task candidates are cubins launched here.
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
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from executor.abi import bind_entry, call_entry
from executor.checking import TrialPolicy, compare_output, measure, timing_stats
from executor.errors import ExecutorError
from executor.inputs import InputSet, generate_inputs
from executor.reference import check_reference_outputs
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask, ScalarArg, Size, Task
from executor.verdict import ErrorKind, Mismatch, TimingStats

logger = logging.getLogger(__name__)


class EvaluationOptions(BaseModel):
    """Knobs of the runtime stages (sent with a request or taken from the settings)."""

    correctness_sets: int = Field(default=3, ge=1, le=20, description="fresh input sets at the test size")
    timing_size_checks: int = Field(
        default=1, ge=0, le=5, description="input sets checked at the timing size"
    )
    run_timing: bool = True
    warmup: int = Field(default=2, ge=0, le=50, description="untimed calls before the trials")
    warmup_ms: float = Field(
        default=30.0, ge=0, le=2000, description="untimed calls go on until this much wall time has passed"
    )
    min_trials: int = Field(default=5, ge=3, le=1000)
    max_trials: int = Field(default=100, ge=3, le=10000)
    min_timing_ms: float = Field(default=20.0, ge=0, description="timed work before timing may stop")
    target_error: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="stop once the median's relative standard error (1.2533*robust CoV/sqrt(trials)) is "
        "at most this; 0: stop at min_trials and min_timing_ms",
    )
    max_timing_s: float = Field(
        default=2.0, gt=0, description="wall-clock cap of the trials of one candidate (after min_trials)"
    )
    rotate_buffers: int = Field(default=3, ge=1, le=8, description="input copies cycled through while timing")
    reference_repeats: int = Field(default=3, ge=1, le=20)
    baseline: bool = True

    def trial_policy(self) -> TrialPolicy:
        """The stopping rule of :func:`executor.checking.measure` for these options."""
        return TrialPolicy(
            warmup=self.warmup,
            warmup_ms=self.warmup_ms,
            min_trials=self.min_trials,
            max_trials=max(self.max_trials, self.min_trials),
            min_total_ms=self.min_timing_ms,
            target_error=self.target_error,
            max_wall_s=self.max_timing_s,
        )


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


class ReferenceJob(BaseModel):
    """A reference worker's job: expected outputs for the evaluation's input sets, and its timing."""

    task: Task
    reference_library: str
    seeds: list[int]
    options: EvaluationOptions = EvaluationOptions()
    sets: int | None = Field(default=None, description="only the first N planned sets (None: all)")
    out_dir: str
    time_reference: bool = False
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


class Runtime:
    """Runs one callable (candidate or baseline) on an input set and times it."""

    device = "host-cpu"

    def run(self, inputs: InputSet) -> dict[str, np.ndarray]:
        """Call on a copy of ``inputs``; return the output arrays."""
        raise NotImplementedError

    def time(self, sources: list[InputSet], options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        """Timing statistics over trials on rotated copies of ``sources``, and the last trial's
        outputs with the index of its source set (for a final check)."""
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

    def run(self, inputs: InputSet) -> dict[str, np.ndarray]:
        work = inputs.copy()
        call_entry(self.fn, self.task, work.scalars, work.arrays)
        self.after_call()
        return {a.name: work.arrays[a.name] for a in self.task.outputs}

    def time(self, sources: list[InputSet], options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        # Distinct host copies per rotation slot, so that no trial finds its inputs in the CPU caches.
        rotated = [sources[j % len(sources)].copy() for j in range(options.rotate_buffers)]
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

    def synchronize(self) -> None:
        """Wait for all work on the device; a sticky error surfaces here as a CUDA error."""
        try:
            self.cuda.Context.synchronize()
        except self.cuda.Error as e:
            raise CandidateFailed(ErrorKind.CUDA_ERROR, f"CUDA error after the call: {e}") from e

    def close(self) -> None:
        """Release the context (best effort: a broken context cannot be popped cleanly)."""
        try:
            self.flush_buffer.free()
            self.ctx.pop()
        except self.cuda.Error as e:
            logger.warning("could not release the CUDA context: %s", e)


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
    with the task's grid/block, timed with CUDA events on the default stream."""

    def __init__(self, gpu: GpuContext, task: KernelTask, product: str, symbol: str) -> None:
        self.gpu = gpu
        self.device = gpu.device
        self.task = task
        self.module = gpu.cuda.module_from_file(product)
        self.kernel = self.module.get_function(symbol)

    def _upload(self, inputs: InputSet, names: list[str] | None = None) -> dict[str, Any]:
        cuda = self.gpu.cuda
        buffers = {}
        for name, array in inputs.arrays.items():
            if names is not None and name not in names:
                continue
            buf = cuda.mem_alloc(max(array.nbytes, 1))
            cuda.memcpy_htod(buf, array)  # outputs carry their poison, inout their initial values
            buffers[name] = buf
        return buffers

    def _launch(self, inputs: InputSet, buffers: dict[str, Any], size: Size) -> None:
        grid, block, shared = self.task.launch_config(size)
        args: list[Any] = []
        for arg in self.task.args:
            if isinstance(arg, ScalarArg):
                args.append(NUMPY_DTYPES[arg.dtype](inputs.scalars[arg.name]))
            else:
                args.append(buffers[arg.name])
        try:
            self.kernel(*args, block=block, grid=grid, shared=shared)
        except self.gpu.cuda.Error as e:
            raise CandidateFailed(ErrorKind.CUDA_ERROR, f"kernel launch failed: {e}") from e

    def _download(self, inputs: InputSet, buffers: dict[str, Any]) -> dict[str, np.ndarray]:
        outputs = {}
        for arg in self.task.outputs:
            host = np.empty_like(inputs.arrays[arg.name])
            self.gpu.cuda.memcpy_dtoh(host, buffers[arg.name])
            outputs[arg.name] = host
        return outputs

    @staticmethod
    def _free(buffers: dict[str, Any]) -> None:
        for buf in buffers.values():
            buf.free()

    def run(self, inputs: InputSet) -> dict[str, np.ndarray]:
        try:
            buffers = self._upload(inputs)
        except self.gpu.cuda.MemoryError as e:
            raise CandidateFailed(ErrorKind.OUT_OF_MEMORY, f"task buffers do not fit: {e}") from e
        try:
            self._launch(inputs, buffers, inputs.size)
            self.gpu.synchronize()
            return self._download(inputs, buffers)
        finally:
            self._free(buffers)

    def time(self, sources: list[InputSet], options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        cuda = self.gpu.cuda
        outputs = [a.name for a in self.task.outputs]
        # Rotated copies of the inputs on the device, so that no trial finds its data already in L2,
        # and one pristine device copy of each source's outputs to restore them from between trials
        # (a device-to-device copy: a host upload of a large output would dominate each trial).
        rotated: list[dict[str, Any]] = []
        pristine: list[dict[str, Any]] = []
        start, end = cuda.Event(), cuda.Event()
        last: dict[str, Any] = {}
        try:
            try:
                pristine.extend(self._upload(s, outputs) for s in sources)
                rotated.extend(self._upload(sources[j % len(sources)]) for j in range(options.rotate_buffers))
            except cuda.MemoryError as e:
                raise CandidateFailed(
                    ErrorKind.OUT_OF_MEMORY, f"rotated timing buffers do not fit: {e}"
                ) from e

            def trial(i: int) -> float:
                j = i % len(rotated)
                k = j % len(sources)
                for name in outputs:  # restore inout / re-poison out (untimed)
                    nbytes = max(sources[k].arrays[name].nbytes, 1)
                    cuda.memcpy_dtod(rotated[j][name], pristine[k][name], nbytes)
                self.gpu.flush_l2()
                start.record()
                self._launch(sources[k], rotated[j], sources[k].size)
                end.record()
                end.synchronize()
                self.gpu.synchronize()
                last.update(set=k, slot=j)
                return float(start.time_till(end))

            samples, stop = measure(trial, options.trial_policy())
            last["outputs"] = self._download(sources[last["set"]], rotated[last["slot"]])
        finally:
            for buffers in rotated + pristine:
                self._free(buffers)
        return timing_stats(samples, stop), last


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

    def progress(self, stage: str) -> None:
        """Record the current stage, so that a timeout can say where it happened."""
        _progress(self.job.progress_path, stage)

    def prepare(self) -> None:
        """Generate every planned input set (does not depend on the candidate: runs while it compiles)."""
        t0 = time.perf_counter()
        self.progress("inputs")
        self.sets = [generate_inputs(self.task, size, seed, self.reference_lib) for seed, size in self.plan]
        self.seconds["inputs"] = time.perf_counter() - t0

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
                directory = Path(self.job.expected_dir)
                self._expected[index] = {
                    a.name: np.load(expected_path(directory, index, a.name), allow_pickle=False)
                    for a in self.task.outputs
                }
            else:
                work = self.sets[index].copy()
                call_entry(self.reference_fn, self.task, work.scalars, work.arrays)
                outputs = {a.name: work.arrays[a.name] for a in self.task.outputs}
                check_reference_outputs(self.task, outputs)
                self._expected[index] = outputs
        return self._expected[index]

    def check(self, inputs: InputSet, got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
        """Raise CandidateFailed on the first output that disagrees with the reference."""
        for arg in self.task.outputs:
            failure = compare_output(
                self.task, arg, got[arg.name], expected[arg.name], inputs.size, inputs.seed
            )
            if failure is not None:
                kind, mismatch = failure
                raise CandidateFailed(
                    kind,
                    f"{mismatch.count}/{mismatch.total} elements of {arg.name!r} differ from the reference "
                    f"at the {inputs.size} size (first at [{mismatch.index}]: "
                    f"expected {mismatch.expected}, got {mismatch.got})",
                    mismatch,
                )

    def run(self, run: CandidateRun) -> WorkerOutcome:
        """Correctness on fresh input sets, then timing; failures come back as outcomes."""
        opts = self.job.options
        if not self.sets:
            self.prepare()
        t0 = time.perf_counter()
        self.progress("correctness")
        candidate = self.runtime_for(run.candidate_product, run.candidate_symbol)
        checked = opts.correctness_sets + opts.timing_size_checks
        done = 0
        try:
            for index in range(checked):
                inputs = self.sets[index]
                # Candidate first, then the reference's answer, then the candidate again on other data:
                # a candidate that caches results between calls answers the next set with stale values.
                got = candidate.run(inputs)
                self.check(inputs, got, self.expected(index))
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
            return self.outcome(e, "correctness", done, candidate.device)
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

        The trials run on rotated copies of the timing-size sets, whose reference outputs are known, so
        the last trial's outputs are checked without running the serial reference again.
        """
        opts = self.job.options
        t0 = time.perf_counter()
        self.progress("timing")
        timing_indices = [i for i, (_, size) in enumerate(self.plan) if size == "timing"]
        sources = [self.sets[i] for i in timing_indices]
        try:
            stats, last = candidate.time(sources, opts)
            # The last timed trial's outputs must still be right: races and state kept across calls
            # that only show up under repetition are caught here.
            index = timing_indices[last["set"]]
            self.check(self.sets[index], last["outputs"], self.expected(index))
        except CandidateFailed as e:
            self.seconds["timing"] = time.perf_counter() - t0
            return self.outcome(e, "timing", checked, candidate.device)
        ref_stats = run.reference_timing
        if ref_stats is None:
            self.progress("reference_timing")
            ref_stats = time_reference(self.reference_fn, self.task, sources[0], opts.reference_repeats)
        baseline_stats = run.baseline_timing
        if baseline_stats is None and opts.baseline and run.baseline_product:
            self.progress("baseline")
            baseline = self.runtime_for(run.baseline_product, self.task.entry)
            baseline_stats, _ = baseline.time(sources, opts)
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


def _write_result(path: str, model: BaseModel) -> None:
    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(model.model_dump_json())
    os.replace(tmp, target)


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
        worker.prepare()
        line = sys.stdin.readline().strip()
        if not line:  # cancelled (the candidate did not compile, or the parent is gone)
            return 0
        run = CandidateRun.model_validate_json(Path(line).read_text())
        outcome = worker.run(run)
    except ExecutorError as e:  # the task's own reference or generator failed, not the candidate
        outcome = _failure(ErrorKind.REFERENCE_ERROR, str(e), worker.seconds)
    except MemoryError as e:
        outcome = _failure(ErrorKind.OUT_OF_MEMORY, f"host memory exhausted: {e}", worker.seconds)
    finally:
        if worker.gpu is not None:
            worker.gpu.close()
    _write_result(job.result_path, outcome)
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``python -m executor.worker serve {candidate|reference} {gpu|host|none}``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(argv) != 3 or argv[0] != "serve" or argv[1] not in ("candidate", "reference"):
        sys.stderr.write("usage: python -m executor.worker serve {candidate|reference} {gpu|host|none}\n")
        return 2
    role, runtime = argv[1], argv[2]
    # Start-up that every job needs is done before the job arrives: that is what a spare pre-warms.
    gpu = GpuContext.create_or_none() if role == "candidate" and runtime == "gpu" else None
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
