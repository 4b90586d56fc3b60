"""The naive baseline's own copies of the timing sets made by the worker while the candidate compiles
(``WorkerJob.baseline_copies``, set by the evaluator when the task's baseline is not timed yet), in the
test-only ``host`` runtime through the sandboxed worker: the baseline is then timed without copying
under the run, on copies of the same sets, and without the flag it copies them in the run as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.checking import timing_stats
from executor.evaluate import Evaluator
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import FAST, build_host_candidates, run_on_timing_sets

ROOT = Path(__file__).resolve().parents[3]
TASKS_DIR = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks"
SAXPY = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n'
OPTIONS = FAST.model_copy(update={"baseline": True})


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(
        tmp_path_factory.mktemp("baseline-copies"), {"candidate": SAXPY, "naive": SAXPY}
    )


def _run(task: FunctionTask | KernelTask, products: dict[str, str], tmp: Path, ahead: bool) -> WorkerOutcome:
    return run_on_timing_sets(
        task, products["candidate"], tmp, OPTIONS, baseline_product=products["naive"], baseline_copies=ahead
    )


@pytest.mark.parametrize("ahead", [True, False])
def test_the_baseline_is_timed_on_copies_made_ahead_only_when_asked(
    saxpy: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path, ahead: bool
) -> None:
    outcome = _run(saxpy, products, tmp_path, ahead)
    assert outcome.passed and outcome.stage == "timing", outcome.message
    assert (
        outcome.baseline_timing is not None and outcome.baseline_timing.trials >= 2 * OPTIONS.timing_sets + 1
    )
    assert ("baseline_inputs" in outcome.seconds) is ahead  # made while the candidate compiled
    assert ("baseline_copies" in outcome.seconds) is not ahead  # made in the run, under its locks


def test_the_evaluator_asks_for_them_only_on_the_gpu_while_the_baseline_is_unknown(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    evaluator = Evaluator(ExecutorSettings(cache_dir=tmp_path, runtime="host", prewarm_workers=False))
    try:
        options = EvaluationOptions()
        assert saxpy.naive_source  # the fixture has a naive.cu
        assert evaluator.baseline_copies_wanted(saxpy, options, "gpu")
        assert not evaluator.baseline_copies_wanted(saxpy, options, "host")  # no baseline timed there
        assert not evaluator.baseline_copies_wanted(
            saxpy, options.model_copy(update={"baseline": False}), "gpu"
        )
        evaluator._remember("baseline", saxpy, timing_stats([1.0] * 7))
        assert not evaluator.baseline_copies_wanted(saxpy, options, "gpu")  # known: not timed again
    finally:
        evaluator.close()
