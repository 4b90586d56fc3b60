"""Two executors of one host share the naive baselines' timings through the disk (executor.basetiming),
in the test-only ``host`` runtime with real worker processes and the real nvcc: an executor uses the
other's timing once it knows its device's model (from its first run), and only then; with
``baseline_timing_cache`` off it keeps its own. Only a baseline worker's timing is kept
(executor.baseline; measured so in test_baseline_worker_host.py); a record that names another source
is not read (tests/unit/executor/test_executor_basetiming.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.checking import timing_stats
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import TimingStats
from executor.worker.messages import BaselineOutcome
from tests.support.buildcache import sharing_builds

ROOT = Path(__file__).resolve().parents[3]
TASKS_DIR = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks"
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
CORRECT = (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }" + STUB
)
QUICK = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1)


def _stats(median_ms: float) -> TimingStats:
    return timing_stats([median_ms] * 7)


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


@pytest.fixture(scope="module")
def executors(
    tmp_path_factory: pytest.TempPathFactory, shared_builds: Path
) -> Iterator[tuple[Evaluator, Evaluator, Evaluator]]:
    cache = sharing_builds(tmp_path_factory.mktemp("shared-cache"), shared_builds)

    def make(shared: bool = True) -> Evaluator:
        return Evaluator(
            ExecutorSettings(
                cache_dir=cache,
                runtime="host",
                run_timeout_s=60,
                compile_workers=1,
                prepare_next=False,
                prewarm_workers=False,  # one evaluation each at most: no spares, killed unused
                baseline_timing_cache=shared,
            )
        )

    built = (make(), make(), make(shared=False))
    yield built
    for evaluator in built:
        evaluator.close()


def test_an_executor_takes_the_baseline_another_executor_of_the_host_timed(
    executors: tuple[Evaluator, Evaluator, Evaluator], saxpy: FunctionTask | KernelTask
) -> None:
    first, second, private = executors
    verdict = first.evaluate(saxpy, CandidateSource(source=CORRECT), QUICK)
    assert verdict.passed, verdict.message
    assert first.device == verdict.device == "host-cpu"  # learnt from its run
    # as its baseline worker's measurement is kept
    first._keep_baseline(saxpy, QUICK, BaselineOutcome(ok=True, timing=_stats(4.0), device="host-cpu"))
    # the second does not know its device yet: it cannot tell whose timing would fit
    assert second.device is None
    assert second._cached_timing("baseline", saxpy, QUICK) is None
    for evaluator in (second, private):
        assert evaluator.evaluate(saxpy, CandidateSource(source=CORRECT + "// 2\n"), QUICK).passed
    shared = second._cached_timing("baseline", saxpy, QUICK)
    assert shared is not None and shared.median_ms == 4.0
    # so its next candidate of the task starts no baseline worker (were it timing baselines here)
    assert second._measure_baseline(saxpy, QUICK, "gpu", Path("unused.so")) is None
    assert private._cached_timing("baseline", saxpy, QUICK) is None  # the cache off: its own only
