"""bench.probes.issue33_cost (where issue 33's cost goes) and bench.probes.stop_rule_sim."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.probes import issue33_cost, stop_rule_sim


def _record(
    task: str, kind: str, finished: float, trials: int, median_ms: float, **seconds: float
) -> dict[str, Any]:
    return {
        "task": task,
        "task_kind": kind,
        "candidate": "correct",
        "error": None,
        "finished_s": finished,
        "trials": trials,
        "stop": "stable",
        "median_ms": median_ms,
        "robust_cov": 0.01,
        "seconds": seconds,
    }


def _run(records: list[dict[str, Any]], turns: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    run: dict[str, Any] = {
        "records": records,
        "verdicts": len(records),
        "steady": {"verdicts": len(records), "per_hour": 1000},
    }
    if turns is not None:
        run["turns"] = turns
    return {"runs": [run]}


def test_the_trials_split_into_timed_calls_and_the_rest() -> None:
    r = _record("t", "function", 50.0, 10, 20.0, timing_trials=0.5)
    calls, rest = issue33_cost.trial_split(r)
    assert calls == pytest.approx(0.2) and rest == pytest.approx(0.3)


def test_a_line_through_the_rest_gives_its_fixed_part_and_its_part_per_trial() -> None:
    fit = issue33_cost.line_fit([7.0, 10.0, 13.0], [0.3 + 0.01 * 7, 0.3 + 0.01 * 10, 0.3 + 0.01 * 13])
    assert fit is not None
    assert fit[0] == pytest.approx(0.3) and fit[1] == pytest.approx(0.01)
    assert issue33_cost.line_fit([7.0, 7.0], [0.1, 0.2]) is None


def test_the_lock_share_counts_only_verdicts_finished_after_the_cutoff() -> None:
    records = [
        _record("a", "function", 30.0, 7, 1.0, gpu_held=5.0),
        _record("a", "function", 45.0, 7, 1.0, gpu_held=6.0),
        _record("b", "kernel", 60.0, 90, 0.1, gpu_held=3.0),
    ]
    assert issue33_cost.steady_lock_share(records, 40.0, 60.0) == pytest.approx(9.0 / 20.0)
    assert issue33_cost.first_seen(records) == {"a": 30.0, "b": 60.0}


def test_the_tables_name_each_tree_and_the_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = _run(
        [
            _record("t", "function", 50.0, 12, 10.0, gpu_held=1.2, timing_trials=0.3, correctness=0.2),
            _record("t", "function", 55.0, 8, 10.0, gpu_held=1.0, timing_trials=0.2, correctness=0.2),
            _record("k", "kernel", 56.0, 90, 0.1, gpu_held=0.2, timing_trials=0.06),
        ],
        turns=[{"turns": {"candidate": 3, "baseline": 2}, "held_s": {"candidate": 2.4, "baseline": 3.0}}],
    )
    base = _run([_record("t", "function", 50.0, 6, 10.0, gpu_held=0.8, timing_trials=0.1, correctness=0.2)])
    (tmp_path / "new.json.gz").write_bytes(gzip.compress(json.dumps(new).encode()))
    (tmp_path / "base.json").write_text(json.dumps(base))
    issue33_cost.main(
        [str(tmp_path / "new.json.gz"), f"old={tmp_path / 'base.json'}", "--steady-after", "40"]
    )
    out = capsys.readouterr().out
    assert "| new | 3 |" in out and "| old | 1 |" in out
    assert "2 (3.0 s)" in out  # the baselines' turns, in no verdict's gpu_held
    assert "| gpu_held | 1.100 | 0.800 | +0.300 |" in out
    assert "| trials | 10.0 | 6.0 | +4.0 |" in out
    # per task: the rest of the trials (0.3 - 0.12 and 0.2 - 0.08 s) on a line over the trial counts
    assert "| t | new | 2 | 10.0 [8-12] | stable 2 |" in out
    assert "| 0.000 + 15.0 |" in out  # 0.18 s at 12 trials, 0.12 s at 8: 15 ms per trial, nothing fixed


def test_the_simulated_rule_takes_fewer_trials_over_repeat_pairs_when_first_visits_are_slow() -> None:
    named = stop_rule_sim.policies()
    case = stop_rule_sim.Case(sigma=0.02, outliers=0.0, first=0.3)
    trials = {}
    for name in ("3 sets, every pair", "3 sets, repeat pairs"):
        rng = np.random.default_rng(0)
        runs = [stop_rule_sim.evaluate(named[name], case, rng, 30.0, 25.0) for _ in range(20)]
        trials[name] = float(np.mean([t for t, _ in runs]))
        assert all(t >= 7 for t, _ in runs)
    assert trials["3 sets, repeat pairs"] < trials["3 sets, every pair"] - 2
