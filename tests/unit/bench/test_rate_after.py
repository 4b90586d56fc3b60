"""The rate after a window's first 45 s and 60 s (bench/probes/rate_after.py), the table that
bench/device/run_fleet38_x2.sh and run_scaling_warm_x2.sh print from a scaling run's records."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bench.probes.rate_after import main, rate_after, rates, render_rate_table

CALL5 = Path(__file__).resolve().parents[3] / "bench/results/2026-11-30_s27/call5"


def _run(wall_s: float, finished: list[float], per_hour: int, **extra: Any) -> dict[str, Any]:
    records = [{"finished_s": f, "seconds": {}} for f in finished]
    return {"wall_s": wall_s, "records": records, "per_hour": per_hour, "verdicts": len(records), **extra}


def test_the_rate_counts_what_finished_after_t_over_the_rest_of_the_window() -> None:
    run = _run(120.0, [10.0, 44.0, 45.0, 46.0, 59.0, 61.0, 119.0], per_hour=210)
    assert rate_after(run, 45) == round(4 / 75 * 3600)  # 46, 59, 61, 119 over 75 s
    assert rate_after(run, 60) == round(2 / 60 * 3600)
    assert rates(run) == [210, 192, 120]
    # 20 s past t or less: too few to count
    assert rate_after(_run(80.0, [70.0], per_hour=45), 60) is None
    assert rate_after(_run(80.1, [70.0], per_hour=45), 60) == round(1 / 20.1 * 3600)


def test_the_efficiency_is_against_the_one_replica_rows_rates() -> None:
    one = _run(120.0, [50.0, 70.0, 100.0], per_hour=90)  # after 45 s: 3 in 75 s; after 60 s: 2 in 60 s
    two = _run(120.0, [50.0, 55.0, 70.0, 80.0, 100.0], per_hour=150)  # 5 in 75 s; 3 in 60 s
    lines = render_rate_table({1: one, 2: two}, "warm")
    assert lines[0].startswith("| replicas | verdicts | wall s | evals/h | after 45 s | after 60 s | eff. |")
    assert lines[1] == "|" + "---|" * 12
    assert lines[2] == "| 1 | 3 | 120.0 | 90 | 144 | 120 | 100% | 100% | 100% | 0 | 0 | 0, - |"
    assert lines[3] == "| 2 | 5 | 120.0 | 150 | 240 | 180 | 83% | 83% | 75% | 0 | 0 | 0, - |"
    # without a 1-replica run, no efficiency; a size without a run says so
    assert render_rate_table({2: two}, "warm")[2:] == [
        "| 1 | no run |",
        "| 2 | 5 | 120.0 | 150 | 240 | 180 | - | - | - | 0 | 0 | 0, - |",
    ]
    # a window too short for the rate after 45 s and 60 s
    short = render_rate_table({1: _run(30.0, [10.0, 20.0], per_hour=240)}, "pilot")
    assert short[2] == "| 1 | 2 | 30.0 | 240 | - | - | 100% | - | - | 0 | 0 |"


def test_each_scripts_own_columns() -> None:
    run = _run(120.0, [50.0, 70.0, 100.0], per_hour=90, turns=[{"turns": {"baseline": 2}}, {"turns": {}}])
    run["records"][0]["seconds"] = {
        "baseline_timing": 1.0,
        "baseline_host_shared": True,
        "baseline_wait": 0.5,
    }
    run["records"][1]["seconds"] = {"baseline_timing": 2.0, "task_prepare_wait": 1.0}
    run["records"][2]["seconds"] = {"task_prepare_wait": 2.0}
    pilot, warm = (render_rate_table({1: run}, c)[2] for c in ("pilot", "warm"))
    assert pilot.endswith("| 100% | 100% | 100% | 2 | 1 |")  # two baselines timed, one shared
    assert warm.endswith("| 100% | 100% | 100% | 2 | 1 | 2, 1.50 |")  # 2 turns, 1 waited, 2 prepared
    with pytest.raises(ValueError, match="columns must be one of"):
        render_rate_table({1: run}, "other")


def test_the_committed_call5_table_comes_out_of_its_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Session 27's call 5 (bench/device/run_fleet38_x2.sh): its summary's table, from its records."""
    with tarfile.open(CALL5 / "scaling_results.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    assert main([str(tmp_path), "--columns", "pilot"]) == 0
    table = capsys.readouterr().out.splitlines()
    summary = (CALL5 / "summary.md").read_text().splitlines()
    start = summary.index(table[0])
    assert summary[start : start + len(table)] == table
    assert table[2:] == [
        "| 1 | 92 | 121.0 | 2736 | 3695 | 3954 | 100% | 100% | 100% | 18 | 4 |",
        "| 2 | 102 | 121.0 | 3034 | 4121 | 4485 | 55% | 56% | 57% | 19 | 5 |",
    ]


def test_bad_input_gets_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing"), "--columns", "pilot"]) == 2
    assert "not a directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--columns", "other"])
    (tmp_path / "queue_1.json").write_text(json.dumps({"runs": []}))
    assert main([str(tmp_path), "--columns", "warm"]) == 0  # a window that did not run: its row says so
    assert capsys.readouterr().out.splitlines()[2:] == ["| 1 | no run |", "| 2 | no run |"]
