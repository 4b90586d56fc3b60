"""bench.probes.trial_trace: the figures it reads from a verdict's trial trace, on made-up traces
whose cause of spread is known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.probes import stop_rule_causes, trial_trace


def _trace(
    n: int, sets: int, slots: int, *, first: float = 0.0, set_off: float = 0.0, copy_off: float = 0.0
) -> list[float]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        x = 10.0 * (1 + 0.002 * rng.standard_normal()) * (1 + set_off * (i % sets))
        if i % slots >= sets:
            x *= 1 + copy_off
        if i < slots:
            x *= 1 + first
        out.append(x)
    return out


def test_a_cold_first_visit_per_copy_shows_as_first_over_repeat() -> None:
    fig = trial_trace.trace_figures(_trace(16, 2, 4, first=0.2), 2, 4)
    assert fig is not None
    assert fig["first/repeat"] == pytest.approx(1.2, abs=0.01)
    # At 8 trials most of a set's pairs hold a first visit: the default rule counts it as noise.
    early = trial_trace.trace_figures(_trace(8, 2, 4, first=0.2), 2, 4)
    assert early is not None
    assert early["spread: every pair"] > 0.05 and early["spread: repeat pairs"] > 0.05
    assert early["spread: one copy's repeats"] < 0.01


def test_a_warm_up_trend_shows_in_the_second_round_and_a_cold_copy_does_not() -> None:
    trend = [10.0 * (1 + 0.4 * 0.6**i) for i in range(16)]  # settling over several rounds
    settling = trial_trace.trace_figures(trend, 2, 2)
    cold = trial_trace.trace_figures(_trace(16, 2, 4, first=0.2), 2, 4)
    assert settling is not None and cold is not None
    assert settling["2nd round/rest"] > 1.1
    assert cold["2nd round/rest"] == pytest.approx(1.0, abs=0.01)


def test_a_slower_set_and_a_slower_copy_are_told_apart() -> None:
    by_set = trial_trace.trace_figures(_trace(16, 2, 4, set_off=0.1), 2, 4)
    by_copy = trial_trace.trace_figures(_trace(16, 2, 4, copy_off=0.1), 2, 4)
    assert by_set is not None and by_copy is not None
    assert by_set["set offset"] == pytest.approx(0.095, abs=0.01) and by_set["copy offset"] < 0.01
    assert by_copy["copy offset"] == pytest.approx(0.1, abs=0.01)
    assert by_set["spread: every pair"] < 0.01 < by_copy["spread: every pair"]


def test_a_trace_shorter_than_two_rounds_gives_nothing() -> None:
    assert trial_trace.trace_figures([1.0, 1.0, 1.0], 2, 4) is None


def test_the_table_reads_a_throughput_json(tmp_path: Path) -> None:
    records = [
        {
            "task": "t",
            "task_kind": "function",
            "candidate": "correct",
            "trials": 16,
            "samples_ms": _trace(16, 2, 4, first=0.2),
            "sets": 2,
            "slots": 4,
        },
        {"task": "t", "task_kind": "function", "candidate": "correct", "trials": 5, "samples_ms": None},
        {
            "task": "k",
            "task_kind": "kernel",
            "candidate": "correct",
            "trials": 16,
            "samples_ms": _trace(16, 2, 4),
            "sets": 2,
            "slots": 4,
        },
    ]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"runs": [{"records": records}]}))
    text = trial_trace.table(trial_trace.load(str(path)))
    assert "| t | 1 | 16.0 | 1.20" in text and "| k |" not in text


def test_the_simulated_cold_first_visit_per_copy_takes_the_trials_the_h200_took() -> None:
    """bench.probes.stop_rule_causes: a first visit per rotated copy 30 % slower gives tonight's rule
    the device's 13-14 trials while 57d0025's (warm copies) stays at 5; one copy per set with the
    repeat-pair rule takes 8, its median unbiased."""
    named, model = stop_rule_causes.rules(), stop_rule_causes.models()["first +30 %"]
    mean = {}
    for name in ("57d0025", "tonight", "2 copies + pairs 5"):
        rng = np.random.default_rng(0)
        runs = [stop_rule_causes.evaluate(named[name], model, rng, 30.0, 10.0) for _ in range(40)]
        mean[name] = float(np.mean([t for t, _, _, _ in runs]))
        if name != "tonight":
            assert abs(float(np.mean([m / truth for _, m, truth, _ in runs])) - 1.0) < 0.005
    assert mean["57d0025"] == pytest.approx(5.0, abs=0.3)
    assert mean["tonight"] >= 12.0
    assert mean["2 copies + pairs 5"] == pytest.approx(8.0, abs=0.5)
