"""GPU runtime stages: correct candidates pass repeatedly, adversarial ones are rejected with the right kind.

Needs an NVIDIA GPU, nvcc and pycuda; skipped cleanly elsewhere. With ``REGRAPH_GPU_TESTS_EXECUTOR_URL``
set (an executor or a fleet serving on that GPU), the tests that use the shared ``evaluator`` send
their candidates there through the client instead of an evaluator in this process; the few that need
settings of their own still build one here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, Protocol

import pytest

from executor.client import ExecutorClient
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.timingset import timing_seed
from executor.verdict import ErrorKind, Verdict
from tests.support.hostcode import use_worker_process

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
TASKS_DIR = HERE.parent / "unit" / "executor" / "fixtures" / "tasks"
ADVERSARIAL = HERE / "adversarial"

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1)


class CandidateEvaluator(Protocol):
    """What the tests need of an evaluator: an in-process `Evaluator`, or a service through its URL."""

    def evaluate(
        self, task: FunctionTask | KernelTask, candidate: CandidateSource, options: EvaluationOptions | None
    ) -> Verdict: ...


class ThroughUrl:
    """Evaluates through an executor's (or a fleet's) HTTP API."""

    def __init__(self, client: ExecutorClient) -> None:
        self.client = client

    def evaluate(
        self, task: FunctionTask | KernelTask, candidate: CandidateSource, options: EvaluationOptions | None
    ) -> Verdict:
        return self.client.evaluate(task, candidate, options)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CandidateEvaluator]:
    url = os.environ.get("REGRAPH_GPU_TESTS_EXECUTOR_URL")
    if url:
        with ExecutorClient(url, timeout_s=600) as client:
            yield ThroughUrl(client)
        return
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("gpu-cache"), runtime="gpu", run_timeout_s=60
    )
    built = Evaluator(settings)
    yield built
    built.close()


def _task(name: str) -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / name)


def _evaluate(
    evaluator: CandidateEvaluator, task: str, source: str, options: EvaluationOptions = QUICK
) -> Verdict:
    return evaluator.evaluate(_task(task), CandidateSource(source=source), options)


def test_naive_function_candidate_passes_repeatedly(evaluator: CandidateEvaluator) -> None:
    task = _task("saxpy")
    assert task.naive_source is not None
    for _ in range(3):
        verdict = _evaluate(evaluator, "saxpy", task.naive_source)
        assert verdict.passed, verdict.message
        assert verdict.runtime_stages == "run" and verdict.error is None
        assert verdict.speedup is not None and verdict.speedup > 0
        assert verdict.reward is not None and verdict.reward > -1.0
        assert verdict.candidate_timing is not None and verdict.candidate_timing.trials >= 5
        assert verdict.baseline_speedup is not None
        assert verdict.device and "sm_" in verdict.device


@pytest.mark.parametrize("on_device", [True, False])
@pytest.mark.parametrize(("task", "file"), [("block_sum", "block_sum_correct.cu")])
def test_correct_kernel_candidate_passes_repeatedly(
    evaluator: CandidateEvaluator, task: str, file: str, on_device: bool
) -> None:
    source = (ADVERSARIAL / file).read_text()
    options = QUICK.model_copy(update={"compare_on_device": on_device})
    for _ in range(3):
        verdict = _evaluate(evaluator, task, source, options)
        assert verdict.passed, verdict.message
        assert verdict.speedup is not None and verdict.speedup > 0
        # Checked on the device, a passing kernel's timing-size outputs are never downloaded.
        assert ("download" in verdict.seconds) is not on_device, verdict.seconds


def test_scale_kernel_passes(evaluator: CandidateEvaluator) -> None:
    source = (
        (ADVERSARIAL / "scale_low_precision.cu")
        .read_text()
        .replace("(double)((float)s * (float)in[i])", "s * in[i]")
    )
    verdict = _evaluate(evaluator, "scale_kernel", source)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize(
    ("task", "file", "kinds"),
    [
        ("block_sum", "block_sum_writes_nothing.cu", {ErrorKind.UNWRITTEN_OUTPUT}),
        ("block_sum", "block_sum_writes_part.cu", {ErrorKind.UNWRITTEN_OUTPUT}),
        ("block_sum", "block_sum_writes_zeros.cu", {ErrorKind.WRONG_OUTPUT}),
        # Its warps read shared memory others have not written yet: stale values, or NaN bit patterns
        # left there, which the output check reports as unwritten (a NaN never passes; seen on an H200
        # in sessions 25 and 37).
        (
            "block_sum",
            "block_sum_race.cu",
            {ErrorKind.WRONG_OUTPUT, ErrorKind.NONDETERMINISTIC, ErrorKind.UNWRITTEN_OUTPUT},
        ),
        (
            "block_sum",
            "block_sum_out_of_bounds.cu",
            {ErrorKind.CUDA_ERROR, ErrorKind.CRASH, ErrorKind.UNWRITTEN_OUTPUT},
        ),
        ("block_sum", "block_sum_infinite_loop.cu", {ErrorKind.TIMEOUT}),
        ("scale_kernel", "scale_low_precision.cu", {ErrorKind.WRONG_OUTPUT}),
        # Stale results from the staging buffer: wrong, or different from call to call.
        ("saxpy", "saxpy_other_stream.cu", {ErrorKind.WRONG_OUTPUT, ErrorKind.NONDETERMINISTIC}),
        ("saxpy", "saxpy_cached.cu", {ErrorKind.WRONG_OUTPUT}),
        ("saxpy", "saxpy_leftover.cu", {ErrorKind.WRONG_OUTPUT}),
        ("saxpy", "saxpy_huge_allocation.cu", {ErrorKind.WRONG_OUTPUT}),
        ("saxpy", "saxpy_huge_host_allocation.cu", {ErrorKind.OUT_OF_MEMORY}),
    ],
)
def test_adversarial_candidates_are_rejected(
    evaluator: CandidateEvaluator, task: str, file: str, kinds: set[ErrorKind]
) -> None:
    verdict = _evaluate(evaluator, task, (ADVERSARIAL / file).read_text())
    assert not verdict.passed
    assert verdict.error in kinds, f"{file}: {verdict.error} {verdict.message}"
    assert verdict.reward == -1.0
    assert verdict.runtime_stages == "run"


def test_other_stream_candidate_passes_once_it_waits(evaluator: Evaluator) -> None:
    # The control for saxpy_other_stream.cu: the same code with the wait it lacks is correct, so its
    # rejection above is due to the stream hazard alone (its arithmetic is right).
    racy = (ADVERSARIAL / "saxpy_other_stream.cu").read_text()
    waits = racy.replace("/* SYNC */", "cudaStreamSynchronize(s);")
    assert waits != racy
    verdict = _evaluate(evaluator, "saxpy", waits)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_kernel_candidates_pass_with_either_compiler(
    tmp_path: Path, compiler: Literal["nvrtc", "nvcc"]
) -> None:
    settings = ExecutorSettings(cache_dir=tmp_path, runtime="gpu", run_timeout_s=60, compiler=compiler)
    own = Evaluator(settings)
    try:
        source = (ADVERSARIAL / "block_sum_correct.cu").read_text()
        for k in range(2):  # the second one runs on workers prepared by the first
            verdict = _evaluate(own, "block_sum", source + f"\n// variant {k}\n")
            assert verdict.passed, verdict.message
            assert verdict.compile is not None and verdict.compile.compiler == compiler
            assert verdict.compile.kernels and verdict.compile.kernels[0].name.startswith(
                "_Z16block_sum_kernel"
            )
            if compiler == "nvcc":
                # NVRTC may answer a source it compiled before in this process from its own cache,
                # without running ptxas: then the kernels come from the CUBIN, with no register count.
                assert verdict.compile.kernels[0].registers
            timing = verdict.candidate_timing
            assert timing is not None and timing.trials >= QUICK.min_trials and timing.stop is not None
            assert "total" in verdict.seconds and "compile" in verdict.seconds
        wrong = _evaluate(own, "block_sum", (ADVERSARIAL / "block_sum_writes_zeros.cu").read_text())
        assert wrong.error is ErrorKind.WRONG_OUTPUT
    finally:
        own.close()


def test_a_sticky_cuda_error_costs_only_its_worker(evaluator: CandidateEvaluator) -> None:
    broken = _evaluate(evaluator, "block_sum", (ADVERSARIAL / "block_sum_out_of_bounds.cu").read_text())
    assert not broken.passed
    source = (ADVERSARIAL / "block_sum_correct.cu").read_text()
    after = _evaluate(evaluator, "block_sum", source + "\n// after a sticky error\n")
    assert after.passed, after.message


def test_timing_records_its_trials_and_spread(evaluator: CandidateEvaluator) -> None:
    source = (ADVERSARIAL / "block_sum_correct.cu").read_text()
    verdict = _evaluate(evaluator, "block_sum", source, EvaluationOptions(reference_repeats=1))
    assert verdict.passed, verdict.message
    timing = verdict.candidate_timing
    assert timing is not None and timing.robust_cov is not None
    assert timing.stop in ("stable", "max_trials", "time_cap")
    assert 5 <= timing.trials <= 100
    # The warm-up ran at least `warmup` launches, and at least `warmup_ms` (30 ms) of them.
    assert timing.warmup_calls is not None and timing.warmup_calls >= 1


# block_sum at the timing size has 65536 blocks: blocks counted past the first 65536 belong to the
# second and later timing-size launches, i.e. to the warm-up and the timed batches (the correctness
# stage launches once at that size). AFTER_FIRST_TIMING_LAUNCH is the body that then runs.
LATE = """
__device__ unsigned int timing_blocks_seen;
__global__ void block_sum_kernel(int blocks, const float* values, float* sums) {
    __shared__ float s[256];
    __shared__ unsigned int seen;
    int t = threadIdx.x;
    if (t == 0) seen = blocks == 65536 ? atomicAdd(&timing_blocks_seen, 1u) : 0u;
    s[t] = values[blockIdx.x * 256 + t];
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) {
        if (seen >= 65536u) { AFTER_FIRST_TIMING_LAUNCH } else { sums[blockIdx.x] = s[0]; }
    }
}
"""


@pytest.mark.parametrize("on_device", [True, False])
def test_the_last_timed_launch_is_checked_on_the_task_timing_set(
    evaluator: CandidateEvaluator, on_device: bool
) -> None:
    """Right in the correctness stage, wrong in the timed batches: the output of the last timed launch
    is checked, against the reference's outputs for the task's timing set (on the device or the
    host; either way the host names the failure)."""
    source = LATE.replace("AFTER_FIRST_TIMING_LAUNCH", "sums[blockIdx.x] = s[0] + 1.0f;")
    options = QUICK.model_copy(update={"compare_on_device": on_device})
    for k in range(2):
        verdict = _evaluate(evaluator, "block_sum", source + f"\n// late {k}\n", options)
        assert verdict.error is ErrorKind.WRONG_OUTPUT, verdict.message
        assert verdict.stage.value == "timing"
        assert verdict.mismatch is not None and verdict.mismatch.size == "timing"
        assert verdict.mismatch.seed is None  # a timing set's seed is withheld


def test_a_fault_in_a_timed_batch_costs_only_its_worker(evaluator: CandidateEvaluator) -> None:
    """An illegal address in one launch of a batch is sticky: it surfaces when the batch is waited
    for, as a CUDA error (or the worker's death), and the next candidate runs normally. (Should the
    stray write land in mapped memory instead, the timed output is left unwritten.) The driver may
    also take longer to report the fault than the batch's call limit (2 s + 10 x its launches' time):
    the worker is then killed by that limit, a timeout (session 20, once in 3 runs on an H200)."""
    source = LATE.replace("AFTER_FIRST_TIMING_LAUNCH", "sums[blockIdx.x + (1 << 28)] = s[0];")
    broken = _evaluate(evaluator, "block_sum", source)
    why = f"{broken.error}: {broken.message} (run limit: {broken.run_limit})"
    kinds = {ErrorKind.CUDA_ERROR, ErrorKind.CRASH, ErrorKind.UNWRITTEN_OUTPUT}
    late_report = broken.error is ErrorKind.TIMEOUT and broken.run_limit is not None
    assert broken.error in kinds or (late_report and broken.run_limit.stopped_by == "call"), why
    assert broken.stage.value == "timing" and broken.reward == -1.0, why
    after = _evaluate(evaluator, "block_sum", (ADVERSARIAL / "block_sum_correct.cu").read_text())
    assert after.passed, after.message


def test_a_hang_in_a_timed_batch_is_a_timeout(tmp_path: Path) -> None:
    settings = ExecutorSettings(cache_dir=tmp_path, runtime="gpu", run_timeout_s=15)
    own = Evaluator(settings)
    try:
        source = LATE.replace(
            "AFTER_FIRST_TIMING_LAUNCH", "volatile int k = 0; while (blocks > 0) { k = k + 1; } sums[0] = k;"
        )
        verdict = _evaluate(own, "block_sum", source)
        assert verdict.error is ErrorKind.TIMEOUT, verdict.message
        assert verdict.stage.value == "timing" and "timing" in verdict.message
    finally:
        own.close()


def test_a_function_candidate_that_hangs_in_its_first_call_is_stopped_by_its_call_limit(
    tmp_path: Path,
) -> None:
    """A function task's first call launches a kernel that never ends and waits for it: the call
    limit (2 s + 10 x the reference's time per call) stops it, not the 30 s run limit."""
    settings = ExecutorSettings(cache_dir=tmp_path, runtime="gpu", run_timeout_s=60, run_limit_floor_s=30)
    source = (
        "#include <cuda_runtime.h>\n"
        "__device__ volatile int never_set;\n"
        "__global__ void spin_kernel(float* y) { while (never_set == 0) {} y[0] = 0.0f; }\n"
        'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
        "    float* d;\n"
        "    cudaMalloc(&d, sizeof(float));\n"
        "    spin_kernel<<<1, 1>>>(d);\n"
        "    cudaDeviceSynchronize();\n"
        "    cudaFree(d);\n"
        "}\n"
    )
    own = Evaluator(settings)
    try:
        verdict = _evaluate(own, "saxpy", source)
    finally:
        own.close()
    assert verdict.error is ErrorKind.TIMEOUT, verdict.message
    limit = verdict.run_limit
    assert limit is not None and limit.stopped_by == "call" and limit.seconds >= 30, verdict.message
    assert "the call on input set 1 of" in verdict.message and "call limit" in verdict.message
    assert limit.call is not None and verdict.seconds["run"] < limit.call.seconds + 5, verdict.message


def test_a_hang_in_a_later_timed_batch_is_stopped_by_its_call_limit(tmp_path: Path) -> None:
    """A kernel that hangs from its 21st launch at the timing size hangs inside a batch of the warm-up
    or the trials. That batch's limit is derived from the candidate's own earlier launches (at 10 x
    the serial reference's time per launch, a batch of 64 would outlast the run limit), so the call
    limit stops it, in seconds."""
    settings = ExecutorSettings(cache_dir=tmp_path, runtime="gpu", run_timeout_s=60)
    own = Evaluator(settings)
    try:
        source = LATE.replace("seen >= 65536u", "seen >= 20u * 65536u").replace(
            "AFTER_FIRST_TIMING_LAUNCH", "volatile int k = 0; while (blocks > 0) { k = k + 1; } sums[0] = k;"
        )
        verdict = _evaluate(own, "block_sum", source)
    finally:
        own.close()
    assert verdict.error is ErrorKind.TIMEOUT, verdict.message
    assert verdict.stage.value == "timing"
    limit = verdict.run_limit
    assert limit is not None and limit.stopped_by == "call", verdict.message
    assert "launches ran longer than its call limit" in verdict.message
    assert "its own slowest so far in these trials" in verdict.message


def test_repeated_timing_on_the_timing_set_agrees(evaluator: CandidateEvaluator) -> None:
    """Batched trials give sane, repeatable medians (a loose bound here; the benchmark measures the
    spread against the 2 % target on larger kernels)."""
    source = (ADVERSARIAL / "block_sum_correct.cu").read_text()
    medians = []
    for k in range(3):
        verdict = _evaluate(evaluator, "block_sum", source + f"\n// repeat {k}\n")
        assert verdict.passed, verdict.message
        timing = verdict.candidate_timing
        assert timing is not None and timing.median_ms > 0 and timing.trials >= QUICK.min_trials
        assert verdict.seconds.get("inputs_wait") is not None
        medians.append(timing.median_ms)
    assert max(medians) <= 1.25 * min(medians), medians


@pytest.mark.parametrize("on_device", [True, False])
def test_a_kernel_wrong_only_at_the_timing_size_fails_its_correctness_check(
    evaluator: CandidateEvaluator, on_device: bool
) -> None:
    """A kernel's fresh timing-size set is checked after the trials on the device, or in a thread while
    the kernel is timed; a failure there is still the verdict, as a correctness failure on that
    (fresh) set."""
    source = (
        "__global__ void scale_kernel(long long count, double s, const double* in, double* out) {\n"
        "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
        "    if (i < count) out[i] = (count > 100000 && i == count - 1) ? 0.0 : s * in[i];\n"
        "}\n"
    )
    verdict = _evaluate(
        evaluator, "scale_kernel", source, QUICK.model_copy(update={"compare_on_device": on_device})
    )
    assert verdict.error is ErrorKind.WRONG_OUTPUT, verdict.message
    assert verdict.stage.value == "correctness"
    assert verdict.mismatch is not None and verdict.mismatch.size == "timing"
    assert verdict.mismatch.seed != timing_seed(_task("scale_kernel"))
    assert verdict.mismatch.index == verdict.mismatch.total - 1 and verdict.mismatch.count == 1


# The naive saxpy, slowed 100 ms on the first call on each of the trials' two host copies (the third and
# fourth timing-size buffers it sees, after the correctness call's and the warm-up's) and on no other:
# a burst of other processes' work on both first visits, as two replicas on one H200 host gave honest
# candidates (session 26).
BURST_SAXPY = (
    "#include <chrono>\nstatic const float* seen[64]; static int nseen = 0;\n"
    "static void burst(int n, const float* x) {\n"
    "    if (n < 100000) return;\n"
    "    for (int k = 0; k < nseen; ++k) if (seen[k] == x) return;\n"
    "    if (nseen < 64) seen[nseen] = x;\n"
    "    if (++nseen == 3 || nseen == 4) {\n"
    "        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);\n"
    "        while (std::chrono::steady_clock::now() < until) {}\n"
    "    }\n}\n"
)


def test_a_burst_on_both_first_visits_is_confirmed_on_a_fresh_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repeat-visit rule's confirming call (option ``repeat_confirm``) on the GPU runtime: the
    candidate above passes, its confirming call timed at about its median; without the call the rule
    refuses it. In its worker's process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``), on an evaluator of
    its own whose workers start so: a candidate in a process of its own (the executor's default where
    that process can be confined) gets no confirming call."""
    use_worker_process(monkeypatch)
    evaluator = Evaluator(ExecutorSettings(cache_dir=tmp_path, runtime="gpu", run_timeout_s=60))
    try:
        _confirmed_burst(evaluator)
    finally:
        evaluator.close()


def _confirmed_burst(evaluator: Evaluator) -> None:
    naive = _task("saxpy").naive_source
    assert naive is not None
    head = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    assert head in naive
    source = BURST_SAXPY + naive.replace(head, head + "    burst(n, x);\n")
    verdict = _evaluate(evaluator, "saxpy", source)
    assert verdict.passed, verdict.message
    assert "repeat_confirm_call" in verdict.seconds, verdict.seconds
    off = _evaluate(
        evaluator, "saxpy", source + "\n// off\n", QUICK.model_copy(update={"repeat_confirm": False})
    )
    assert off.error is ErrorKind.IMPLAUSIBLE, off.message
