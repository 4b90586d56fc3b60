"""The isolated worker: runs a candidate's runtime stages in its own process.

Started by :mod:`executor.sandbox` as ``python -m executor.worker JOB.json RESULT.json`` in a new
process group. It builds nothing; it loads the prebuilt reference library and candidate product,
generates fresh inputs, checks correctness, times, and writes a :class:`WorkerOutcome`. If the candidate
crashes, hangs or exhausts memory, this process dies and the parent turns that into a verdict.

Two runtimes share the same flow:

* ``gpu``: pycuda (imported lazily) with the device's primary context; function-task candidates are
  .so files called through ctypes on host pointers, kernel-task candidates are cubins launched here.
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
from executor.checking import compare_output, measure, timing_stats
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
    warmup: int = Field(default=3, ge=0, le=50)
    min_trials: int = Field(default=10, ge=3, le=1000)
    max_trials: int = Field(default=100, ge=3, le=10000)
    min_timing_ms: float = Field(default=200.0, ge=0)
    rotate_buffers: int = Field(default=3, ge=1, le=8, description="input copies cycled through while timing")
    reference_repeats: int = Field(default=3, ge=1, le=20)
    baseline: bool = True


class WorkerJob(BaseModel):
    """Everything the worker needs; written as JSON by the parent."""

    task: Task
    runtime: Literal["gpu", "host", "none"]
    candidate_product: str
    candidate_symbol: str
    baseline_product: str | None = None
    reference_library: str
    seeds: list[int]
    options: EvaluationOptions = EvaluationOptions()
    reference_timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    memory_limit_bytes: int | None = None
    progress_path: str | None = None


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

    def time(
        self, input_sets: list[InputSet], options: EvaluationOptions
    ) -> tuple[TimingStats, dict[str, Any]]:
        """Timing statistics over trials, and the outputs of the last trial (for a final check)."""
        raise NotImplementedError


class HostFunctionRuntime(Runtime):
    """A function-task .so called on host memory (no GPU)."""

    def __init__(self, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        self.task = task
        self.fn = bind_entry(ctypes.CDLL(product), symbol, task)

    def run(self, inputs: InputSet) -> dict[str, np.ndarray]:
        work = inputs.copy()
        call_entry(self.fn, self.task, work.scalars, work.arrays)
        return {a.name: work.arrays[a.name] for a in self.task.outputs}

    def time(
        self, input_sets: list[InputSet], options: EvaluationOptions
    ) -> tuple[TimingStats, dict[str, Any]]:
        last: dict[str, Any] = {}

        def trial(i: int) -> float:
            work = input_sets[i % len(input_sets)].copy()  # restores inout and re-poisons out (untimed)
            start = time.perf_counter()
            call_entry(self.fn, self.task, work.scalars, work.arrays)
            elapsed = (time.perf_counter() - start) * 1e3
            last.clear()
            last.update(
                set=i % len(input_sets), outputs={a.name: work.arrays[a.name] for a in self.task.outputs}
            )
            return elapsed

        samples = measure(
            trial, options.warmup, options.min_trials, options.max_trials, options.min_timing_ms
        )
        return timing_stats(samples), last


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


class GpuFunctionRuntime(Runtime):
    """A function-task .so (host pointers in, host pointers out) timed on the GPU host.

    The call allocates, copies and launches by itself, possibly on other streams, so the timed region
    is the call plus a device-wide synchronisation, measured with the host clock.
    """

    def __init__(self, gpu: GpuContext, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        self.gpu = gpu
        self.device = gpu.device
        self.task = task
        self.fn = bind_entry(ctypes.CDLL(product), symbol, task)

    def run(self, inputs: InputSet) -> dict[str, np.ndarray]:
        work = inputs.copy()
        call_entry(self.fn, self.task, work.scalars, work.arrays)
        self.gpu.synchronize()
        return {a.name: work.arrays[a.name] for a in self.task.outputs}

    def time(
        self, input_sets: list[InputSet], options: EvaluationOptions
    ) -> tuple[TimingStats, dict[str, Any]]:
        last: dict[str, Any] = {}

        def trial(i: int) -> float:
            work = input_sets[i % len(input_sets)].copy()
            self.gpu.flush_l2()
            start = time.perf_counter()
            call_entry(self.fn, self.task, work.scalars, work.arrays)
            self.gpu.synchronize()
            elapsed = (time.perf_counter() - start) * 1e3
            last.clear()
            last.update(
                set=i % len(input_sets), outputs={a.name: work.arrays[a.name] for a in self.task.outputs}
            )
            return elapsed

        samples = measure(
            trial, options.warmup, options.min_trials, options.max_trials, options.min_timing_ms
        )
        return timing_stats(samples), last


class GpuKernelRuntime(Runtime):
    """A kernel-task cubin: device buffers allocated here, inputs copied, outputs poisoned, launched
    with the task's grid/block, timed with CUDA events on the default stream."""

    def __init__(self, gpu: GpuContext, task: KernelTask, product: str, symbol: str) -> None:
        self.gpu = gpu
        self.device = gpu.device
        self.task = task
        self.module = gpu.cuda.module_from_file(product)
        self.kernel = self.module.get_function(symbol)

    def _upload(self, inputs: InputSet) -> dict[str, Any]:
        cuda = self.gpu.cuda
        buffers = {}
        for name, array in inputs.arrays.items():
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

    def time(
        self, input_sets: list[InputSet], options: EvaluationOptions
    ) -> tuple[TimingStats, dict[str, Any]]:
        cuda = self.gpu.cuda
        # Rotated copies of the inputs on the device, so that no trial finds its data already in L2.
        rotated = [self._upload(s) for s in input_sets]
        start, end = cuda.Event(), cuda.Event()
        last: dict[str, Any] = {}
        try:

            def trial(i: int) -> float:
                k = i % len(input_sets)
                for arg in self.task.outputs:  # restore inout / re-poison out (untimed)
                    cuda.memcpy_htod(rotated[k][arg.name], input_sets[k].arrays[arg.name])
                self.gpu.flush_l2()
                start.record()
                self._launch(input_sets[k], rotated[k], input_sets[k].size)
                end.record()
                end.synchronize()
                self.gpu.synchronize()
                last["set"] = k
                return float(start.time_till(end))

            samples = measure(
                trial, options.warmup, options.min_trials, options.max_trials, options.min_timing_ms
            )
            last["outputs"] = self._download(input_sets[last["set"]], rotated[last["set"]])
        finally:
            for buffers in rotated:
                self._free(buffers)
        return timing_stats(samples), last


# --- the flow -------------------------------------------------------------------------------------------


class Worker:
    """Runs one job's runtime stages."""

    def __init__(self, job: WorkerJob) -> None:
        self.job = job
        self.task = job.task
        self.reference_lib = ctypes.CDLL(job.reference_library)
        self.reference_fn = bind_entry(self.reference_lib, self.task.reference_symbol, self.task)
        self.gpu: GpuContext | None = None
        self.seconds: dict[str, float] = {}

    def progress(self, stage: str) -> None:
        """Record the current stage, so that a timeout can say where it happened."""
        if self.job.progress_path:
            Path(self.job.progress_path).write_text(stage)

    def runtime_for(self, product: str, symbol: str) -> Runtime:
        """The runtime that fits the job (GPU function/kernel, or host function)."""
        if self.job.runtime == "host":
            return HostFunctionRuntime(self.task, product, symbol)
        if self.gpu is None:
            self.gpu = GpuContext()
        if isinstance(self.task, KernelTask):
            return GpuKernelRuntime(self.gpu, self.task, product, symbol)
        return GpuFunctionRuntime(self.gpu, self.task, product, symbol)

    def reference(self, inputs: InputSet) -> dict[str, np.ndarray]:
        """The serial reference's outputs for an input set."""
        work = inputs.copy()
        call_entry(self.reference_fn, self.task, work.scalars, work.arrays)
        outputs = {a.name: work.arrays[a.name] for a in self.task.outputs}
        check_reference_outputs(self.task, outputs)
        return outputs

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

    def run(self) -> WorkerOutcome:
        """Correctness on fresh input sets, then timing; failures come back as outcomes."""
        opts = self.job.options
        t0 = time.perf_counter()
        if self.job.runtime == "none":
            return self.reference_only()
        self.progress("correctness")
        candidate = self.runtime_for(self.job.candidate_product, self.job.candidate_symbol)
        seeds = list(self.job.seeds)
        test_sizes: list[Size] = ["test"] * opts.correctness_sets
        timing_sizes: list[Size] = ["timing"] * opts.timing_size_checks
        sizes = test_sizes + timing_sizes
        if len(seeds) < len(sizes):
            raise ValueError(f"job has {len(seeds)} seeds for {len(sizes)} input sets")
        checked: list[tuple[InputSet, dict[str, np.ndarray]]] = []
        try:
            for seed, size in zip(seeds, sizes, strict=False):
                inputs = generate_inputs(self.task, size, seed, self.reference_lib)
                # Candidate first, then the reference, then the candidate again on other data: a
                # candidate that caches results between calls answers the next set with stale values.
                got = candidate.run(inputs)
                expected = self.reference(inputs)
                self.check(inputs, got, expected)
                checked.append((inputs, expected))
            # Repeat the first set: a race that happened to pass once should not pass twice by luck.
            first_inputs, first_expected = checked[0]
            try:
                self.check(first_inputs, candidate.run(first_inputs), first_expected)
            except CandidateFailed as e:
                raise CandidateFailed(
                    ErrorKind.NONDETERMINISTIC,
                    "the same inputs gave a correct answer once and a wrong one later: " + str(e),
                    e.mismatch,
                ) from e
        except CandidateFailed as e:
            self.seconds["correctness"] = time.perf_counter() - t0
            return self.outcome(False, "correctness", e, len(checked), candidate.device)
        self.seconds["correctness"] = time.perf_counter() - t0
        if not opts.run_timing:
            return WorkerOutcome(
                passed=True,
                stage="correctness",
                input_sets_checked=len(checked),
                device=candidate.device,
                seconds=self.seconds,
            )
        return self.timing(candidate, checked)

    def timing(
        self, candidate: Runtime, checked: list[tuple[InputSet, dict[str, np.ndarray]]]
    ) -> WorkerOutcome:
        """Time candidate, serial reference and (optionally) the naive CUDA baseline at the timing size."""
        opts = self.job.options
        t0 = time.perf_counter()
        self.progress("timing")
        base_seed = self.job.seeds[-1]
        sets = [
            generate_inputs(self.task, "timing", base_seed + 7919 * (k + 1), self.reference_lib)
            for k in range(opts.rotate_buffers)
        ]
        try:
            stats, last = candidate.time(sets, opts)
            # The last timed trial's outputs must still be right: races and state kept across calls
            # that only show up under repetition are caught here.
            self.check(sets[last["set"]], last["outputs"], self.reference(sets[last["set"]]))
        except CandidateFailed as e:
            self.seconds["timing"] = time.perf_counter() - t0
            return self.outcome(False, "timing", e, len(checked), candidate.device)
        ref_stats = self.job.reference_timing or self.time_reference(sets[0])
        baseline_stats = self.job.baseline_timing
        if baseline_stats is None and opts.baseline and self.job.baseline_product:
            self.progress("baseline")
            baseline = self.runtime_for(self.job.baseline_product, self.task.entry)
            baseline_stats, _ = baseline.time(sets, opts)
        self.seconds["timing"] = time.perf_counter() - t0
        return WorkerOutcome(
            passed=True,
            stage="timing",
            input_sets_checked=len(checked) + 1,
            candidate_timing=stats,
            reference_timing=ref_stats,
            baseline_timing=baseline_stats,
            device=candidate.device,
            seconds=self.seconds,
        )

    def reference_only(self) -> WorkerOutcome:
        """No runtime for candidates here: still run the reference once, so that a broken task shows."""
        self.progress("reference")
        inputs = generate_inputs(self.task, "test", self.job.seeds[0], self.reference_lib)
        self.reference(inputs)
        return WorkerOutcome(
            passed=False,
            stage="correctness",
            error=ErrorKind.RUNTIME_NOT_AVAILABLE,
            message="no GPU runtime on this executor: static checks and compilation passed and "
            "the reference ran on the CPU; correctness and timing were not run",
            device="none",
        )

    def time_reference(self, inputs: InputSet) -> TimingStats:
        """The serial reference on one CPU core at the timing size (a few repeats: it is slow)."""
        self.progress("reference_timing")
        samples = []
        for _ in range(self.job.options.reference_repeats):
            work = inputs.copy()
            start = time.perf_counter()
            call_entry(self.reference_fn, self.task, work.scalars, work.arrays)
            samples.append((time.perf_counter() - start) * 1e3)
        return timing_stats(samples)

    def outcome(
        self,
        passed: bool,
        stage: Literal["correctness", "timing"],
        failure: CandidateFailed,
        checked: int,
        device: str,
    ) -> WorkerOutcome:
        """A failed outcome from a CandidateFailed signal."""
        return WorkerOutcome(
            passed=passed,
            stage=stage,
            error=failure.kind,
            message=str(failure),
            mismatch=failure.mismatch,
            input_sets_checked=checked,
            device=device,
            seconds=self.seconds,
        )


def _limit_memory(limit: int | None, runtime: str) -> None:
    # RLIMIT_AS breaks CUDA (the driver reserves huge virtual ranges), so on the GPU path the parent
    # watches resident memory instead; on the host path the kernel enforces the limit here.
    if limit is not None and runtime == "host":
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> int:
    """Entry point: ``python -m executor.worker JOB.json RESULT.json``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    job_path, result_path = Path(argv[0]), Path(argv[1])
    job = WorkerJob.model_validate_json(job_path.read_text())
    _limit_memory(job.memory_limit_bytes, job.runtime)
    worker = Worker(job)
    try:
        outcome = worker.run()
    except ExecutorError as e:  # the task's own reference or generator failed, not the candidate
        outcome = WorkerOutcome(
            passed=False,
            stage="correctness",
            error=ErrorKind.REFERENCE_ERROR,
            message=str(e),
            seconds=worker.seconds,
        )
    except MemoryError as e:
        outcome = WorkerOutcome(
            passed=False,
            stage="correctness",
            error=ErrorKind.OUT_OF_MEMORY,
            message=f"host memory exhausted: {e}",
            seconds=worker.seconds,
        )
    finally:
        if worker.gpu is not None:
            worker.gpu.close()
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(outcome.model_dump_json())
    os.replace(tmp, result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
