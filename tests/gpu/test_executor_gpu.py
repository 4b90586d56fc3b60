"""GPU runtime stages: correct candidates pass repeatedly, adversarial ones are rejected with the right kind.

Needs an NVIDIA GPU, nvcc and pycuda; skipped cleanly elsewhere.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

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
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Evaluator:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("gpu-cache"), runtime="gpu", run_timeout_s=60
    )
    return Evaluator(settings)


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
