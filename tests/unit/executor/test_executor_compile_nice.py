"""Builds run at a lower CPU priority than the executor (``compile_nice``): with a dozen nvcc runs in
flight on a GPU host, a function task's trials, timed on the host clock, keep their CPU."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from executor.compile import Compiler
from executor.settings import ExecutorSettings
from executor.verdict import CompileResult
from tests.support.workers import processes_working_in

SOURCE = 'extern "C" void scale(int n, float a, float* x) { for (int i = 0; i < n; ++i) x[i] *= a; }\n'


def _build_niceness(directory: Path, nice: int, tag: str) -> set[int]:
    """The niceness of every process of a build started in ``directory`` (nvcc and the stages it
    starts), sampled while the build runs."""
    compiler = Compiler(directory, choice="nvcc", nice=nice)
    results: list[CompileResult] = []
    building = threading.Thread(
        target=lambda: results.append(compiler.compile_source(SOURCE + f"// {tag}\n", "shared_library"))
    )
    building.start()
    seen: set[int] = set()
    while building.is_alive():
        for proc in processes_working_in(directory):
            try:
                # field 19 of /proc/PID/stat, counted after the command's closing parenthesis
                seen.add(int((proc / "stat").read_text().rsplit(")", 1)[1].split()[16]))
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.01)
    building.join()
    assert results and results[0].ok, results and results[0].log
    return seen


def test_builds_run_at_the_lower_priority_asked_for(tmp_path: Path) -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    if own + 7 > 19:
        pytest.skip("this process already runs at the lowest priority")
    lowered = _build_niceness(tmp_path / "lowered", 7, "lowered")
    assert lowered == {own + 7}, lowered
    same = _build_niceness(tmp_path / "same", 0, "same")
    assert same == {own}, same


def test_the_executor_lowers_its_builds_by_default() -> None:
    assert ExecutorSettings().compile_nice == 10
    compiler = Compiler.from_settings(ExecutorSettings(compile_nice=3), "sm_90")
    assert compiler.nice == 3
