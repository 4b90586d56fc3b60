"""The service's runtime data has one home (regraph_data/): the API's settings name it, the benchmark
reads the same tasks, and the environment moves it (REGRAPH_TASKS_DIR, REGRAPH_SEED_GRAPH)."""

from __future__ import annotations

from pathlib import Path

import pytest

import regraph_data
from api.settings import ApiSettings
from bench.split import DEFAULT_TASKS_DIR
from executor.taskformat import load_task
from graphdb.export import read_export


def test_the_api_and_the_benchmark_read_the_task_library_and_the_seed_graph_from_the_data_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REGRAPH_TASKS_DIR", raising=False)
    monkeypatch.delenv("REGRAPH_SEED_GRAPH", raising=False)
    settings = ApiSettings()
    assert settings.tasks_dir == regraph_data.TASKS_DIR == DEFAULT_TASKS_DIR
    assert settings.seed_graph == regraph_data.SEED_GRAPH_PATH
    assert Path(regraph_data.__file__).resolve().parent == regraph_data.HOME


def test_the_data_package_holds_loadable_tasks_and_the_seed_graph() -> None:
    function_tasks = sorted(regraph_data.TASKS_DIR.glob("*/task.json"))
    kernel_tasks = sorted(regraph_data.KERNEL_TASKS_DIR.glob("*/task.json"))
    assert len(function_tasks) >= 80 and len(kernel_tasks) >= 20
    assert load_task(function_tasks[0].parent).id == function_tasks[0].parent.name
    assert load_task(kernel_tasks[0].parent).id == kernel_tasks[0].parent.name
    assert read_export(regraph_data.SEED_GRAPH_PATH).techniques


def test_the_environment_moves_the_runtime_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGRAPH_TASKS_DIR", str(tmp_path / "tasks"))
    monkeypatch.setenv("REGRAPH_SEED_GRAPH", str(tmp_path / "seed.json"))
    settings = ApiSettings()
    assert settings.tasks_dir == tmp_path / "tasks" and settings.seed_graph == tmp_path / "seed.json"
    monkeypatch.setenv("REGRAPH_SEED_GRAPH", "none")
    assert ApiSettings().seed_graph is None
