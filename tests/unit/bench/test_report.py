"""Reports of measured runs (as a GPU executor would produce them): numbers, plots and comparisons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.metrics import OVERALL
from bench.report import write_report
from bench.runner import BenchResult, RunInfo, SampleRecord, build_search_result, read_result, verdict_outcome
from executor.verdict import CompileResult, ErrorKind, Stage, TimingStats, Verdict

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _info(method: str) -> RunInfo:
    return RunInfo(
        kind="search",
        method=method,
        model="replay",
        samples=2,
        evaluation_budget=5,
        tasks=["a", "b"],
        task_selection="listed tasks (2)",
        executor_url="http://gpu:8081",
        device={"name": "NVIDIA H100", "nvcc": "12.8"},
        verification="verified",
        ks=[1, 2],
    )


def _sample(task: str, tier: str, i: int, speedup: float | None) -> SampleRecord:
    return SampleRecord(
        task_id=task,
        tier=tier,
        domain="d",
        sample=i,
        seed=i,
        method="m",
        answer="best" if speedup else "compiled",
        compiled=True,
        correct=speedup is not None,
        runtime_stages="run",
        speedup=speedup,
        baseline_speedup=speedup / 2 if speedup else None,
        error=None if speedup else "wrong_output",
        search_evaluations=3,
        final_evaluations=1 if speedup else 0,
        prompt_tokens=100,
        completion_tokens=50,
        seconds=1.5,
    )


def _measured(method: str, b_speedup: float | None) -> BenchResult:
    samples = [
        _sample("a", "easy", 0, 4.0),
        _sample("a", "easy", 1, None),
        _sample("b", "hard", 0, b_speedup),
        _sample("b", "hard", 1, 16.0),
    ]
    return build_search_result(_info(method), samples, [])


def test_measured_run_reports_numbers_and_plots(tmp_path: Path) -> None:
    result = _measured("regraph-mcgs", 1.0)
    assert result.runtime_measured and result.complete and not result.note
    assert result.totals.executor_evaluations == 4 * 3 + 3 and result.totals.seconds == 6.0
    overall = result.metrics[OVERALL] if result.metrics else None
    assert overall is not None and overall.pass_at_k == pytest.approx({"1": 0.75, "2": 1.0})
    path = write_report([result], tmp_path)
    report = path.read_text()
    assert "not run" not in report and "Runtime stages not run" not in report
    # overall row: 4 samples, compile 100%, pass@1 75.0%, pass@2 100.0%; geo-mean of 4, 1, 16 is 4.00.
    assert "| overall | 2 | 4 | 100.0% | 75.0% | 100.0% |" in report
    assert "| 4.00 |" in report
    assert (tmp_path / "speedup_per_tier.png").read_bytes().startswith(PNG_MAGIC)
    assert "![speedup per tier](speedup_per_tier.png)" in report
    (tmp_path / "result.json").write_text(result.model_dump_json())
    assert read_result(tmp_path / "result.json") == result


def test_several_runs_are_compared(tmp_path: Path) -> None:
    runs = [_measured("regraph-mcgs", 1.0), _measured("standard", None)]
    write_report(runs, tmp_path)
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert [r["method"] for r in comparison["runs"]] == ["regraph-mcgs", "standard"]
    # standard: a has 1 of 2 correct, b 1 of 2: pass@1 0.5.
    assert comparison["runs"][1]["overall"]["pass_at_k"]["1"] == pytest.approx(0.5)
    assert (tmp_path / "pass_at_k.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "run1_speedup_per_tier.png").is_file() and (
        tmp_path / "run2_speedup_per_tier.png"
    ).is_file()
    assert "## Comparison (all tiers)" in (tmp_path / "report.md").read_text()


def _verdict(**fields: object) -> Verdict:
    base: dict[str, object] = {"task_id": "a", "compile": CompileResult(ok=True, kind="shared_library")}
    return Verdict.model_validate({**base, **fields})


def test_verdict_outcomes() -> None:
    timing = TimingStats(trials=10, median_ms=1, mean_ms=1, min_ms=1, max_ms=1, iqr_ms=0, cov=0)
    passed = _verdict(
        stage=Stage.TIMING, passed=True, runtime_stages="run", speedup=3.0, candidate_timing=timing
    )
    assert verdict_outcome(passed) == (True, True)
    not_run = _verdict(stage=Stage.COMPILE, passed=False, error=ErrorKind.RUNTIME_NOT_AVAILABLE)
    assert verdict_outcome(not_run) == (True, None)
    wrong = _verdict(
        stage=Stage.CORRECTNESS, passed=False, runtime_stages="run", error=ErrorKind.WRONG_OUTPUT
    )
    assert verdict_outcome(wrong) == (True, False)
    broken = Verdict(
        task_id="a",
        stage=Stage.COMPILE,
        passed=False,
        error=ErrorKind.COMPILE_ERROR,
        compile=CompileResult(ok=False, kind="shared_library"),
    )
    assert verdict_outcome(broken) == (False, False)


def test_report_names_the_preset_and_both_speedup_conventions(tmp_path: Path) -> None:
    from search.mcgs import MCGSConfig

    info = _info("regraph-mcgs")
    info.search = MCGSConfig(preset="paper").model_dump(exclude={"seed", "evaluation_budget", "token_budget"})
    samples = [_sample("a", "easy", 0, None), _sample("a", "easy", 1, 4.0)]
    samples += [_sample("b", "hard", 0, 2.0), _sample("b", "hard", 1, 2.0)]
    report = write_report([build_search_result(info, samples, [])], tmp_path).read_text()
    assert "regraph-mcgs [preset paper] (replay)" in report
    assert "| search settings | preset **paper**: rollouts 10, exploration 1.41, prior uniform," in report
    assert "rollouts_in_flight 1, examples_per_step 1," in report
    # A = [fail, 4x], B = [2x, 2x]: speedup@1 2.00 ours, 3.00 by ParEval's code; speedup@2 3.00 and 4.00.
    assert (
        "| speedup@1 (ours) | speedup@2 (ours) | speedup@1 (ParEval code) | speedup@2 (ParEval code) |"
        in report
    )
    assert "| 2.00 | 3.00 | 3.00 | 4.00 |" in report
