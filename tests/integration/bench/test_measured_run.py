"""The runner's measured path (passes, speedups, final re-evaluation, metrics, plots) on this GPU-less machine.

The executor's test-only ``host`` runtime runs function-task libraries on the CPU, so a candidate whose
kernel launch sits behind a branch that is never taken is really checked and timed. The replayed
trajectory has one such correct step and one wrong step; every other part is the real thing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.metrics import OVERALL
from bench.runner import CudaEvalRunner, model_factory, select_tasks
from executor.app import create_app
from executor.client import ExecutorClient
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import dump_task
from search.inmemory import InMemoryKnowledge
from search.protocols import INITIAL_TECHNIQUE
from tests.support.hostcode import saxpy_timed_at
from tests.support.servers import serve_in_thread

CORRECT_ON_HOST = """__global__ void never_launched(float* y) { y[0] = 0.0f; }
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    if (n < 0) never_launched<<<1, 1>>>(y);  // never taken: the host runtime computes on the CPU
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
"""
WRONG = CORRECT_ON_HOST.replace("a * x[i] + y[i]", "a * x[i] - y[i]")
FAST = EvaluationOptions(correctness_sets=2, min_trials=3, max_trials=5, min_timing_ms=5, reference_repeats=1)


@pytest.fixture(scope="module")
def host_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ExecutorSettings(cache_dir=tmp_path_factory.mktemp("cache"), runtime="host", compile_workers=2)
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_measured_run_scores_passes_and_speedups(host_executor: str, tmp_path: Path) -> None:
    # saxpy timed at 256 Ki floats: what is checked (passes, failures, speedups and their report) does
    # not depend on the timing size, and each evaluation made and compared 16-MiB timing sets.
    dump_task(saxpy_timed_at(), tmp_path / "tasks" / "saxpy")
    (tmp_path / "trajectories").mkdir()
    trajectory = tmp_path / "trajectories" / "saxpy.jsonl"
    steps = [
        {"method": "Parallelization", "think": "t", "code": CORRECT_ON_HOST},
        {"method": "Loop unrolling", "think": "t", "code": WRONG},
    ]
    trajectory.write_text(
        json.dumps({"format": "regraph.trajectory/v1", "task_id": "saxpy", "model": "m", "steps": steps})
        + "\n"
    )
    selection = select_tasks(
        ["saxpy"],
        tasks_dir=tmp_path / "tasks",
        trajectories_dir=tmp_path / "trajectories",
        split_path=tmp_path / "none.json",
    )
    model, description = model_factory(str(trajectory))
    out = tmp_path / "out"
    with ExecutorClient(host_executor) as client:
        result = CudaEvalRunner(
            method="regraph-mcgs",
            selection=selection,
            client=client,
            executor_url=host_executor,
            model=model,
            model_description=description,
            knowledge=lambda: InMemoryKnowledge(
                edges=[(INITIAL_TECHNIQUE, "Parallelization"), ("Parallelization", "Loop unrolling")]
            ),
            knowledge_description="two edges",
            out_dir=out,
            samples=2,
            evaluation_budget=4,
            evaluation_options=FAST,
            search_overrides={"rollouts": 2},
        ).run()

    assert result.run.verification == "verified" and result.runtime_measured and result.complete
    for sample in result.samples:
        # The correct step is the best; the wrong one was tried and failed; the best was timed again.
        assert sample.answer == "best" and sample.compiled and sample.correct is True
        assert sample.best_path == [INITIAL_TECHNIQUE, "Parallelization"]
        # At least the correct and the wrong step were evaluated, within the budget, and all compiled.
        assert 2 <= sample.search_evaluations <= 4 and sample.candidates_compiled == sample.search_evaluations
        assert set(sample.failures) == {"wrong_output"}
        assert sample.final_evaluations == 1 and sample.runtime_stages == "run"
        assert sample.speedup is not None and sample.speedup > 0 and sample.search_speedup is not None
    assert result.totals.executor_evaluations == sum(s.search_evaluations for s in result.samples) + 2
    assert result.metrics is not None
    overall = result.metrics[OVERALL]
    assert (
        overall.pass_at_k == {"1": 1.0, "2": 1.0}
        and overall.fast_p is not None
        and overall.fast_p["0"] == 1.0
    )
    speedups = [s.speedup for s in result.samples if s.speedup is not None]
    assert overall.speedup_at_k is not None and overall.speedup_at_k["2"] == pytest.approx(max(speedups))
    report = (out / "report.md").read_text()
    assert "not run" not in report and "| overall | 1 | 2 | 100.0% | 100.0% | 100.0% |" in report
    assert (out / "speedup_per_tier.png").is_file()
