"""The runner on a real GPU executor: runtime stages run, so pass@k and speedups are measured.

Needs an NVIDIA GPU and pycuda; skipped cleanly elsewhere.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.metrics import OVERALL
from bench.runner import (
    CudaEvalRunner,
    TeacherRunner,
    knowledge_from_trajectories,
    model_factory,
    select_tasks,
)
from executor.app import create_app
from executor.client import ExecutorClient
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

REPO = Path(__file__).resolve().parents[3]
HELD_OUT = ["to_upper_ascii_u8", "reduce_sum_f64"]
BUILDING = ["rgb_gray_half_u8", "complex_dot_rows_f32"]
QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1)


@pytest.fixture(scope="module")
def gpu_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ExecutorSettings(cache_dir=tmp_path_factory.mktemp("cache"), runtime="gpu")
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_search_and_teacher_runs_are_measured(gpu_executor: str, tmp_path: Path) -> None:
    (tmp_path / "trajectories").mkdir()
    for task_id in HELD_OUT + BUILDING:
        shutil.copytree(REPO / "regraph_data" / "tasks" / task_id, tmp_path / "tasks" / task_id)
        shutil.copy(REPO / "bench" / "trajectories" / f"{task_id}.jsonl", tmp_path / "trajectories")
    dirs = {"tasks_dir": tmp_path / "tasks", "trajectories_dir": tmp_path / "trajectories"}
    selection = select_tasks([",".join(HELD_OUT)], split_path=tmp_path / "none.json", **dirs)
    model, description = model_factory("teacher", trajectories_dir=tmp_path / "trajectories")
    with ExecutorClient(gpu_executor) as client:
        result = CudaEvalRunner(
            method="regraph-mcgs",
            selection=selection,
            client=client,
            executor_url=gpu_executor,
            model=model,
            model_description=description,
            knowledge=lambda: knowledge_from_trajectories(selection.build_ids, **dirs),
            knowledge_description="test graph",
            out_dir=tmp_path / "search",
            samples=2,
            evaluation_budget=4,
            evaluation_options=QUICK,
        ).run()
        teacher = TeacherRunner(selection, client, gpu_executor, tmp_path / "teacher").run()
    assert result.run.verification == "verified" and result.runtime_measured
    assert result.metrics is not None and result.metrics[OVERALL].pass_at_k is not None
    for sample in result.samples:
        assert sample.runtime_stages == "run" and sample.correct is not None
        if sample.correct:
            assert sample.speedup is not None and sample.speedup > 0 and sample.final_evaluations == 1
    assert teacher.runtime_measured and teacher.teacher_metrics is not None
    assert teacher.teacher_metrics[OVERALL].final_pass_rate is not None
    assert "not run" not in (tmp_path / "teacher" / "report.md").read_text()
