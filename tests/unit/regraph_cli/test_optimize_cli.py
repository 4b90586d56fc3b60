"""`regraph optimize` in process against the real executor (compile-only here), and request resolution."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from api.optimize.errors import InvalidTaskError, TaskNotFoundError
from api.optimize.models import OptimizeCreate
from api.optimize.service import resolve_task
from executor.taskformat import load_task
from regraph_cli.optimize import optimize_command, trajectory_knowledge
from search.mcgs import MCGSConfig
from search.protocols import INITIAL_TECHNIQUE
from tests.support.servers import compile_only_executor

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "regraph_data" / "tasks"
TASK_ID = "mandelbrot_q28_i32"


@pytest.fixture(scope="module")
def executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with compile_only_executor(tmp_path_factory.mktemp("executor-cache")) as url:
        yield url


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("optimize")(optimize_command)
    app.command("noop")(lambda: None)  # two commands keep `optimize` a sub-command, as in regraph
    return app


def test_optimize_runs_in_process_and_reports_compile_only(executor_url: str, tmp_path: Path) -> None:
    args = [
        "optimize",
        str(TASKS / TASK_ID / "reference.cpp"),
        "--task",
        str(TASKS / TASK_ID),
        "--executor-url",
        executor_url,
        "--replay",
        str(ROOT / "bench" / "trajectories" / f"{TASK_ID}.jsonl"),
        "--graph",
        "trajectories",
        "--budget",
        "4",
        "--rollouts-in-flight",
        "2",
        "--out",
        str(tmp_path),
    ]
    outcome = CliRunner().invoke(_cli(), args)
    assert outcome.exit_code == 0, outcome.output
    assert "best verified code: none" in outcome.output
    result = json.loads((tmp_path / TASK_ID / "result.json").read_text())
    assert result["verification"] == "compile-only"
    assert result["search"]["best_code"] is None
    assert result["search"]["config"]["rollouts_in_flight"] == 2  # the option reached the search
    first = result["search"]["candidates"][0]
    assert first["technique"] == "Parallelization"
    assert first["evaluation"]["error_kind"] == "not_verified"
    assert not (tmp_path / TASK_ID / "best.cu").exists()


def test_optimize_without_an_executor_is_a_clear_error(tmp_path: Path) -> None:
    args = [
        "optimize",
        str(TASKS / TASK_ID / "reference.cpp"),
        "--task",
        str(TASKS / TASK_ID),
        "--graph",
        "trajectories",
        "--out",
        str(tmp_path),
    ]
    outcome = CliRunner(env={"REGRAPH_EXECUTOR_URL": None}).invoke(_cli(), args)
    assert outcome.exit_code == 1
    assert "--executor-url" in outcome.output


def test_trajectory_graph_leaves_out_the_task_itself() -> None:
    knowledge = trajectory_knowledge(ROOT / "bench" / "trajectories", TASKS, exclude_task=TASK_ID)
    first = knowledge.successors(INITIAL_TECHNIQUE, "int main() {}", k=50)
    assert any(o.technique == "Parallelization" for o in first)
    assert all(e.task_id != TASK_ID for o in first for e in o.examples)


def test_a_malformed_trajectory_file_is_a_clear_error(executor_url: str, tmp_path: Path) -> None:
    good = (ROOT / "bench" / "trajectories" / "gemm_f32.jsonl").read_text(encoding="utf-8").splitlines()[0]
    broken = tmp_path / "trajectories.jsonl"
    broken.write_text(good + "\n" + '{"task_id": "gemm_f32", "steps": [{"method": 3}]}\n', encoding="utf-8")
    args = [
        "optimize",
        str(TASKS / TASK_ID / "reference.cpp"),
        "--task",
        str(TASKS / TASK_ID),
        "--executor-url",
        executor_url,
        "--replay",
        str(ROOT / "bench" / "trajectories" / f"{TASK_ID}.jsonl"),
        "--graph",
        "trajectories",
        "--trajectories",
        str(broken),
        "--out",
        str(tmp_path / "out"),
    ]
    outcome = CliRunner().invoke(_cli(), args)
    assert outcome.exit_code == 1, outcome.output
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit)
    flat = "".join(outcome.output.split())  # the console wraps long paths
    assert f"{broken.name}:2:nota" in flat and "steps.0.method" in flat  # the bad line, and what is wrong
    assert not (tmp_path / "out").exists()


def test_a_serial_source_stands_in_for_a_missing_reference() -> None:
    task = load_task(TASKS / TASK_ID)
    serial = task.reference_source
    bare = task.model_copy(update={"reference_source": ""})
    plan = resolve_task(OptimizeCreate(task=bare, source=serial, method="standard"), None)
    assert plan.task.reference_source == serial and plan.context.initial_code == serial
    with pytest.raises(InvalidTaskError, match="reference_source"):
        resolve_task(OptimizeCreate(task=bare, source="__global__ void k() {}", method="standard"), None)


def test_task_refs_resolve_in_the_tasks_directory() -> None:
    plan = resolve_task(OptimizeCreate(task_ref=TASK_ID, method="regraph-mcgs"), TASKS)
    assert plan.task.id == TASK_ID and plan.context.initial_code == plan.task.reference_source
    with pytest.raises(TaskNotFoundError):
        resolve_task(OptimizeCreate(task_ref="nope", method="standard"), TASKS)
    with pytest.raises(TaskNotFoundError, match="REGRAPH_TASKS_DIR"):
        resolve_task(OptimizeCreate(task_ref=TASK_ID, method="standard"), None)


def test_search_config_follows_the_request() -> None:
    config = OptimizeCreate(
        task_ref=TASK_ID, method="regraph-mcgs", budget=7, rollouts=3, seed=5
    ).search_config()
    assert isinstance(config, MCGSConfig)
    assert (config.evaluation_budget, config.rollouts, config.seed) == (7, 3, 5)
    assert config.rollouts_in_flight == MCGSConfig().rollouts_in_flight > 1  # overlap by default
    sequential = OptimizeCreate(task_ref=TASK_ID, method="regraph-mcgs", rollouts_in_flight=1).search_config()
    assert isinstance(sequential, MCGSConfig) and sequential.rollouts_in_flight == 1
    plain = OptimizeCreate(task_ref=TASK_ID, method="cot", budget=2).search_config()
    assert not isinstance(plain, MCGSConfig) and plain.evaluation_budget == 2
