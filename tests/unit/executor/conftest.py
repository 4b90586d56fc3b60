"""Fixtures for the executor's unit tests: the small sample tasks under fixtures/tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.taskformat import FunctionTask, KernelTask, load_task

TASKS_DIR = Path(__file__).parent / "fixtures" / "tasks"


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the whole session, so the g++/nvcc builds are paid once."""
    return tmp_path_factory.mktemp("executor-cache")


@pytest.fixture
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


@pytest.fixture
def scale_kernel() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "scale_kernel")
