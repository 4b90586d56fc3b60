"""Every benchmark task loads, its serial reference runs at the test size, and its trajectory is sound.

The references are real g++ builds run through the executor (no GPU needed); the libraries are built
once, in parallel, by a module fixture so that the per-task tests only hit the executor's cache.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from bench.probes import check_tasks as _checker
from executor.reference import build_reference, run_reference
from executor.taskformat import FunctionTask, KernelTask, load_task

TRAJECTORY_FORMAT = _checker.TRAJECTORY_FORMAT
tier_for_steps = _checker.tier_for_steps

REPO_ROOT = Path(__file__).resolve().parents[3]
TASKS_DIR = REPO_ROOT / "regraph_data" / "tasks"
TRAJECTORIES_DIR = REPO_ROOT / "bench" / "trajectories"

TASK_DIRS = (
    sorted(p for p in TASKS_DIR.iterdir() if (p / "task.json").is_file()) if TASKS_DIR.is_dir() else []
)
TASK_IDS = [p.name for p in TASK_DIRS]


@pytest.fixture(scope="module")
def tasks() -> Iterator[dict[str, FunctionTask | KernelTask]]:
    """All tasks, loaded once, with their reference libraries built up front on every core."""
    loaded = {p.name: load_task(p) for p in TASK_DIRS}
    with ThreadPoolExecutor(max_workers=4) as pool:
        # g++ runs as a subprocess, so threads overlap the builds; result() re-raises build errors.
        for future in [pool.submit(build_reference, t) for t in loaded.values()]:
            future.result()
    yield loaded


def test_there_are_tasks() -> None:
    assert len(TASK_DIRS) >= 1
    assert len(set(TASK_IDS)) == len(TASK_IDS)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_is_deterministic_and_input_dependent(
    task_id: str, tasks: dict[str, FunctionTask | KernelTask]
) -> None:
    task = tasks[task_id]
    # run_reference itself rejects non-finite float outputs and integer outputs left at the poison value.
    first = run_reference(task, "test", seed=11)
    again = run_reference(task, "test", seed=11)
    other = run_reference(task, "test", seed=12)

    assert set(first.outputs) == {a.name for a in task.outputs}
    for name, out in first.outputs.items():
        assert out.size == task.array_length(next(a for a in task.outputs if a.name == name), "test")
        np.testing.assert_array_equal(out, again.outputs[name], err_msg=f"{name} differs for the same seed")

    inputs_differ = any(not np.array_equal(first.inputs[k], other.inputs[k]) for k in first.inputs)
    if inputs_differ:
        assert any(not np.array_equal(first.outputs[k], other.outputs[k]) for k in first.outputs), (
            "the outputs do not depend on the inputs"
        )


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_naive_candidate_defines_the_entry(task_id: str, tasks: dict[str, FunctionTask | KernelTask]) -> None:
    task = tasks[task_id]
    if task.kind != "function":
        pytest.skip("kernel tasks have no host entry in naive.cu")
    assert task.naive_source, "function tasks ship a naive.cu"
    assert re.search(r'extern\s+"C"[^;{]*\b' + re.escape(task.entry) + r"\s*\(", task.naive_source)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_trajectory_matches_task(task_id: str, tasks: dict[str, FunctionTask | KernelTask]) -> None:
    task = tasks[task_id]
    path = TRAJECTORIES_DIR / f"{task_id}.jsonl"
    assert path.is_file(), f"missing trajectory {path.name}"
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert len(lines) >= 1
    for line in lines:
        trajectory = json.loads(line)
        assert trajectory["format"] == TRAJECTORY_FORMAT
        assert trajectory["task_id"] == task_id
        assert trajectory["model"]
        steps = trajectory["steps"]
        assert len(steps) >= 1
        for i, step in enumerate(steps, start=1):
            for key in ("method", "think", "detail", "code"):
                assert isinstance(step.get(key), str) and step[key].strip(), f"step {i} has no {key}"
            if task.kind == "function":
                assert re.search(r'extern\s+"C"[^;{]*\b' + re.escape(task.entry) + r"\s*\(", step["code"]), (
                    f"step {i} does not define the entry {task.entry}"
                )
        # Consecutive steps must actually change the code.
        codes = [s["code"] for s in steps]
        assert all(a != b for a, b in itertools.pairwise(codes))
        assert task.tier_hint == tier_for_steps(len(steps))
