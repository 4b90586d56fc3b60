"""Runner helpers: merging teacher runs split across device sessions, and per-method search settings."""

from __future__ import annotations

import pytest

from bench.metrics import OVERALL
from bench.runner import (
    BenchResult,
    RunInfo,
    RunnerError,
    TeacherStepRecord,
    Totals,
    merge_teacher_results,
)


def _info(tasks: list[str], device: str = "NVIDIA H100") -> RunInfo:
    return RunInfo(
        kind="teacher",
        tasks=tasks,
        task_selection=f"listed tasks ({len(tasks)})",
        executor_url="http://gpu:8081",
        device={"name": device},
        verification="verified",
    )


def _step(task: str, tier: str, step: int, speedup: float | None) -> TeacherStepRecord:
    return TeacherStepRecord(
        task_id=task,
        tier=tier,
        domain="d",
        trajectory=1,
        step=step,
        method=f"m{step}",
        compiled=True,
        correct=speedup is not None,
        runtime_stages="run",
        speedup=speedup,
        error=None if speedup is not None else "wrong_output",
        verdict={"seconds": {"compile": 1.0, "timing": 2.0}},
    )


def _run(
    steps: list[TeacherStepRecord], missing: list[str] | None = None, device: str = "NVIDIA H100"
) -> BenchResult:
    tasks = sorted({s.task_id for s in steps} | set(missing or []))
    return BenchResult(
        created_at="2026-11-22T10:00:00+00:00",
        run=_info(tasks, device),
        complete=not missing,
        missing_tasks=missing or [],
        runtime_measured=True,
        totals=Totals(executor_evaluations=len(steps)),
        teacher_steps=steps,
    )


def test_merge_keeps_the_last_measurement_of_a_task_and_recomputes_metrics() -> None:
    first = _run([_step("a", "easy", 1, 2.0), _step("b", "hard", 1, None)], missing=["c"])
    # b was re-measured in the second run (now correct, two steps); c measured there too.
    second = _run([_step("b", "hard", 1, 3.0), _step("b", "hard", 2, 9.0), _step("c", "easy", 1, 4.0)])

    merged = merge_teacher_results([first, second])

    assert merged.complete and merged.missing_tasks == []
    assert [(s.task_id, s.step, s.speedup) for s in merged.teacher_steps] == [
        ("a", 1, 2.0),
        ("b", 1, 3.0),
        ("b", 2, 9.0),
        ("c", 1, 4.0),
    ]
    assert merged.totals.executor_evaluations == 4
    assert merged.totals.seconds == pytest.approx(12.0)
    assert merged.teacher_metrics is not None
    overall = merged.teacher_metrics[OVERALL]
    hard = merged.teacher_metrics["hard"]
    assert overall.tasks == 3 and hard.tasks == 1
    assert hard.final_pass_rate == 1.0


def test_merge_reports_tasks_no_run_measured_as_missing() -> None:
    merged = merge_teacher_results([_run([_step("a", "easy", 1, 2.0)], missing=["z"])])
    assert not merged.complete
    assert merged.missing_tasks == ["z"]
    assert merged.run.tasks == ["a", "z"]


def test_merge_refuses_mixed_devices_and_nothing() -> None:
    with pytest.raises(RunnerError, match="different devices"):
        merge_teacher_results(
            [_run([_step("a", "easy", 1, 2.0)]), _run([_step("b", "easy", 1, 2.0)], device="NVIDIA H200")]
        )
    with pytest.raises(RunnerError, match="at least one"):
        merge_teacher_results([])


def test_search_settings_are_checked_per_method() -> None:
    from bench.runner import search_config
    from search.mcgs import MCGSConfig

    config = search_config("regraph-mcgs", {"rollouts": 4, "seed": 3})
    assert isinstance(config, MCGSConfig) and config.rollouts == 4 and config.seed == 3
    with pytest.raises(RunnerError, match="unknown search setting"):
        search_config("standard", {"rollouts": 4})
    with pytest.raises(RunnerError, match="invalid search settings"):
        search_config("regraph-mcgs", {"rollouts": 0})
    from search.mcts_rag import MCTSRAGConfig

    mcts = search_config("mcts-rag", {"branching": 2})
    assert isinstance(mcts, MCTSRAGConfig) and mcts.branching == 2
    with pytest.raises(RunnerError, match="unknown search setting"):
        search_config("rag", {"branching": 2})
    paper = search_config("regraph-mcgs", {"preset": "paper"})
    assert isinstance(paper, MCGSConfig) and paper.prior == "uniform" and paper.rollouts_in_flight == 1
    with pytest.raises(RunnerError, match="preset 'paper' fixes"):
        search_config("regraph-mcgs", {"preset": "paper", "examples_per_step": 3})
