"""The task checker accepts a sound task and flags broken ones (real g++; nvcc skipped for speed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.probes import check_tasks as _checker

main = _checker.main
tier_for_steps = _checker.tier_for_steps

REPO_ROOT = Path(__file__).resolve().parents[3]
SAMPLE = "gemv_rowmajor_f32"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of one real task and its trajectory."""
    tasks, trajectories = tmp_path / "tasks", tmp_path / "trajectories"
    shutil.copytree(REPO_ROOT / "regraph_data" / "tasks" / SAMPLE, tasks / SAMPLE)
    trajectories.mkdir()
    shutil.copy(REPO_ROOT / "bench" / "trajectories" / f"{SAMPLE}.jsonl", trajectories)
    return tasks, trajectories


def _run(layout: tuple[Path, Path]) -> int:
    tasks, trajectories = layout
    return main(
        ["--tasks-dir", str(tasks), "--trajectories-dir", str(trajectories), "--no-nvcc", "--no-cache"]
    )


def test_tiers_follow_step_counts() -> None:
    assert [tier_for_steps(n) for n in (1, 2, 3, 5, 6, 9)] == [
        "easy",
        "easy",
        "medium",
        "medium",
        "hard",
        "hard",
    ]


def test_sound_task_passes(layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(layout) == 0
    assert SAMPLE in capsys.readouterr().out


def test_reference_that_does_not_compile_fails(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ref = layout[0] / SAMPLE / "reference.cpp"
    ref.write_text(ref.read_text().replace("double acc = 0.0;", "double acc = undeclared;"))
    assert _run(layout) == 1
    assert "undeclared" in capsys.readouterr().out


def test_wrong_tier_hint_and_printing_step_fail(
    layout: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    traj_path = layout[1] / f"{SAMPLE}.jsonl"
    trajectory = json.loads(traj_path.read_text())
    trajectory["steps"] = trajectory["steps"][:1]
    trajectory["steps"][0]["code"] += '\nvoid debug() { printf("x"); }\n'
    traj_path.write_text(json.dumps(trajectory) + "\n")
    assert _run(layout) == 1
    out = capsys.readouterr().out
    assert "tier_hint 'medium'" in out
    assert "printf" in out


def test_nvcc_is_the_executors(monkeypatch: pytest.MonkeyPatch) -> None:
    from executor.compile import find_toolchain

    monkeypatch.delenv("REGRAPH_NVCC", raising=False)
    toolchain = find_toolchain()
    assert _checker.find_nvcc() == (toolchain.nvcc, toolchain.extra_flags)
    compiler = _checker.nvcc_compiler(use_cache=False)
    assert compiler.flags == (*_checker.NVCC_FLAGS, *toolchain.extra_flags, "-c")
    assert compiler.compile("__global__ void k(int* x) { *x = 1; }\n") is None
    assert "undefined" in (compiler.compile("__global__ void k2(int* x) { *x = y; }\n") or "")


def test_an_unusable_nvcc_is_a_toolchain_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\necho not a compiler\n")
    fake.chmod(0o755)
    monkeypatch.setenv("REGRAPH_NVCC", str(fake))
    with pytest.raises(_checker.MissingCompilerError, match="no usable nvcc"):
        _checker.find_nvcc()
