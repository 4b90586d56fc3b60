"""The executor's default concurrency follows the machine (issue 20): evaluations in flight are what let
compiles and input preparation overlap the GPU's work, and two were far too few on a 16-core GPU host."""

from __future__ import annotations

import pytest

from executor.settings import ExecutorSettings, default_compile_workers


@pytest.mark.parametrize(
    ("cpus", "workers"),
    [(None, 2), (1, 2), (2, 2), (4, 3), (8, 6), (16, 12), (24, 16), (128, 16)],
)
def test_evaluations_in_flight_default_to_three_quarters_of_the_cores(cpus: int | None, workers: int) -> None:
    assert default_compile_workers(cpus) == workers


def test_the_default_is_this_machines_and_a_setting_overrides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("executor.settings.os.cpu_count", lambda: 16)
    assert ExecutorSettings().compile_workers == 12
    monkeypatch.setenv("REGRAPH_EXECUTOR_COMPILE_WORKERS", "5")
    assert ExecutorSettings().compile_workers == 5
