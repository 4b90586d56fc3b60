"""bench.probes.stop_rule_replay: stop rules replayed on recorded trials give what the executor's rule
gives on them, and say where the record ran out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.probes import stop_rule_replay as replay_probe
from executor.checking import TrialSamples, measure


def _evaluate(samples: list[float]) -> tuple[TrialSamples, str]:
    """The executor's own rule on ``samples`` (one call at a time, as function tasks are timed)."""
    policy = replay_probe.host_policy(policy_warmup=0, policy_warmup_ms=0.0)
    it = iter(samples)
    return measure(lambda i: next(it) if i >= 0 else 1.0, policy)


def _record(samples: list[float], task: str = "t") -> dict[str, object]:
    kept, stop = _evaluate(samples)
    from executor.checking import timing_stats

    stats = timing_stats(kept, stop)  # type: ignore[arg-type]
    return {
        "task": task,
        "task_kind": "function",
        "candidate": "correct",
        "error": None,
        "trials": stats.trials,
        "median_ms": stats.median_ms,
        "samples_ms": list(kept)[:40],
        "seconds": {"timing_trials": 0.02 * stats.trials},
    }


def _burst(n: int, start: int, length: int, slower: float, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    out = [10.0 * (1 + 0.01 * float(rng.standard_normal())) for _ in range(n)]
    for i in range(start, min(n, start + length)):
        out[i] *= slower
    return out


def test_the_defaults_replayed_give_the_executors_trials_and_median() -> None:
    for seed, (start, length) in enumerate([(0, 0), (3, 6), (2, 14), (0, 4)]):
        record = _record(_burst(200, start, length, 1.8, seed))
        trials, median, exact = replay_probe.replay(
            record["samples_ms"],  # type: ignore[arg-type]
            replay_probe.host_policy(),
            record["trials"],  # type: ignore[arg-type]
            record["median_ms"],  # type: ignore[arg-type]
        )
        assert exact and trials == record["trials"]
        assert median == pytest.approx(record["median_ms"])


def test_a_record_cut_at_40_trials_falls_back_to_its_own_outcome() -> None:
    # Noise as large as the time: the rule goes on to its 100 trials, past the 40 recorded.
    rng = np.random.default_rng(1)
    samples = [10.0 * (1.0 + abs(float(rng.standard_normal()))) for _ in range(200)]
    record = _record(samples)
    assert record["trials"] > 40  # type: ignore[operator]
    trials, median, exact = replay_probe.replay(
        record["samples_ms"],  # type: ignore[arg-type]
        replay_probe.host_policy(),
        record["trials"],  # type: ignore[arg-type]
        record["median_ms"],  # type: ignore[arg-type]
    )
    assert not exact and (trials, median) == (record["trials"], record["median_ms"])


def test_a_looser_target_stops_no_later_and_the_table_shows_it(tmp_path: Path) -> None:
    records = [_record(_burst(200, 2, k, 1.5, k), task=f"t{k % 2}") for k in range(6)]
    loose = replay_probe.host_policy(host_target_error=0.05)
    for r in records:
        trials, _, _ = replay_probe.replay(r["samples_ms"], loose, r["trials"], r["median_ms"])  # type: ignore[arg-type]
        assert trials <= r["trials"]  # type: ignore[operator]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"runs": [{"records": records}]}))
    lines: list[str] = []
    replay_probe.main([str(run), "--rules", "defaults,target 5 %"], out=lines.append)
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| task | n | defaults | target 5 % |"
    assert table[-1].startswith("| **all** | 6 | ")
    # The run's own rule replayed: every record exact, nothing saved, the median its own.
    assert "(100%) / +0.000 / 0.0%, 0.0%, 0% / " in table[-1].split(" | ")[2]
