"""GPU runtime stages: correct candidates pass repeatedly, adversarial ones are rejected with the right kind.

Needs an NVIDIA GPU, nvcc and pycuda; skipped cleanly elsewhere.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from executor.evaluate import Candidate, Evaluator
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind, Verdict
from executor.worker import EvaluationOptions

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
TASKS_DIR = HERE.parent / "unit" / "executor" / "fixtures" / "tasks"
ADVERSARIAL = HERE / "adversarial"

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("gpu-cache"), runtime="gpu", run_timeout_s=60
    )
    built = Evaluator(settings)
    yield built
    built.close()


def _task(name: str) -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / name)


def _evaluate(evaluator: Evaluator, task: str, source: str, options: EvaluationOptions = QUICK) -> Verdict:
    return evaluator.evaluate(_task(task), Candidate(source=source), options)


def test_naive_function_candidate_passes_repeatedly(evaluator: Evaluator) -> None:
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


@pytest.mark.parametrize(("task", "file"), [("block_sum", "block_sum_correct.cu")])
def test_correct_kernel_candidate_passes_repeatedly(evaluator: Evaluator, task: str, file: str) -> None:
    source = (ADVERSARIAL / file).read_text()
    for _ in range(3):
        verdict = _evaluate(evaluator, task, source)
        assert verdict.passed, verdict.message
        assert verdict.speedup is not None and verdict.speedup > 0


def test_scale_kernel_passes(evaluator: Evaluator) -> None:
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
        ("block_sum", "block_sum_race.cu", {ErrorKind.WRONG_OUTPUT, ErrorKind.NONDETERMINISTIC}),
        (
            "block_sum",
            "block_sum_out_of_bounds.cu",
            {ErrorKind.CUDA_ERROR, ErrorKind.CRASH, ErrorKind.UNWRITTEN_OUTPUT},
        ),
        ("block_sum", "block_sum_infinite_loop.cu", {ErrorKind.TIMEOUT}),
        ("scale_kernel", "scale_low_precision.cu", {ErrorKind.WRONG_OUTPUT}),
        ("saxpy", "saxpy_other_stream.cu", {ErrorKind.WRONG_OUTPUT, ErrorKind.NONDETERMINISTIC}),
        ("saxpy", "saxpy_cached.cu", {ErrorKind.WRONG_OUTPUT}),
        ("saxpy", "saxpy_leftover.cu", {ErrorKind.WRONG_OUTPUT}),
        ("saxpy", "saxpy_huge_allocation.cu", {ErrorKind.WRONG_OUTPUT, ErrorKind.OUT_OF_MEMORY}),
    ],
)
def test_adversarial_candidates_are_rejected(
    evaluator: Evaluator, task: str, file: str, kinds: set[ErrorKind]
) -> None:
    verdict = _evaluate(evaluator, task, (ADVERSARIAL / file).read_text())
    assert not verdict.passed
    assert verdict.error in kinds, f"{file}: {verdict.error} {verdict.message}"
    assert verdict.reward == -1.0
    assert verdict.runtime_stages == "run"


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


def test_a_sticky_cuda_error_costs_only_its_worker(evaluator: Evaluator) -> None:
    broken = _evaluate(evaluator, "block_sum", (ADVERSARIAL / "block_sum_out_of_bounds.cu").read_text())
    assert not broken.passed
    source = (ADVERSARIAL / "block_sum_correct.cu").read_text()
    after = _evaluate(evaluator, "block_sum", source + "\n// after a sticky error\n")
    assert after.passed, after.message


def test_timing_records_its_trials_and_spread(evaluator: Evaluator) -> None:
    source = (ADVERSARIAL / "block_sum_correct.cu").read_text()
    verdict = _evaluate(evaluator, "block_sum", source, EvaluationOptions(reference_repeats=1))
    assert verdict.passed, verdict.message
    timing = verdict.candidate_timing
    assert timing is not None and timing.robust_cov is not None
    assert timing.stop in ("stable", "max_trials", "time_cap")
    assert 5 <= timing.trials <= 100
