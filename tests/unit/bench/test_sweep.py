"""The budget/rollout sweep's points, error bars, table and plots, against values worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.runner import BenchResult, build_search_result
from bench.sweep import SweepError, mean_with_error, read_sweep, run_sweep
from tests.unit.bench.test_report import PNG_MAGIC, _info, _sample


def _result(b_speedup: float) -> BenchResult:
    # Task a: [fail, 4x]; task b: [b_speedup, 2x].
    samples = [_sample("a", "easy", 0, None), _sample("a", "easy", 1, 4.0)]
    samples += [_sample("b", "hard", 0, b_speedup), _sample("b", "hard", 1, 2.0)]
    return build_search_result(_info("regraph-mcgs"), samples, [])


def test_mean_with_error_by_hand() -> None:
    one = mean_with_error([0.5, 1.0])
    # std(ddof=1) of (0.5, 1.0) = 0.3536; / sqrt(2) = 0.25
    assert (one.mean, one.stderr, one.tasks) == (0.75, pytest.approx(0.25), 2)
    assert mean_with_error([3.0]).stderr is None
    with pytest.raises(SweepError):
        mean_with_error([])


def test_sweep_points_tables_and_plots(tmp_path: Path) -> None:
    results = {(2, 1): _result(2.0), (4, 1): _result(6.0)}
    seen: list[tuple[int, int, Path]] = []

    def run_one(budget: int, rollouts: int, run_dir: Path) -> BenchResult:
        seen.append((budget, rollouts, run_dir))
        return results[(budget, rollouts)]

    sweep = run_sweep(run_one, [2, 4], [1], tmp_path, method="regraph-mcgs", model="replay", ks=(1, 2))
    assert [(b, r, d.name) for b, r, d in seen] == [(2, 1, "budget2_rollouts1"), (4, 1, "budget4_rollouts1")]
    low, high = sweep.points
    assert low.pass_at_k is not None and low.speedup_at_k is not None and low.speedup_at_k_pareval is not None
    # pass@1: a 1/2, b 1 -> 0.75 +- 0.25. speedup@1 ours: a (0+4)/2 = 2, b 2 -> 2 +- 0;
    # ParEval's code: a 4 (its failure dropped), b 2 -> 3 +- 1.
    assert (low.pass_at_k["1"].mean, low.pass_at_k["1"].stderr) == (0.75, pytest.approx(0.25))
    assert (low.speedup_at_k["1"].mean, low.speedup_at_k["1"].stderr) == (2.0, 0.0)
    assert (low.speedup_at_k_pareval["1"].mean, low.speedup_at_k_pareval["1"].stderr) == (3.0, 1.0)
    # Budget 4: b = [6, 2] -> ours b 4, a 2 -> 3 +- 1; speedup@2 ours: a 4, b 6 -> 5 +- 1.
    assert high.speedup_at_k is not None and high.speedup_at_k["2"].mean == 5.0
    assert high.speedup_at_k["1"].mean == 3.0 and high.speedup_at_k["1"].stderr == pytest.approx(1.0)
    table = (tmp_path / "sweep.md").read_text()
    assert "| 2 | 1 | yes | 100.0% | 75.0% ± 25.0% | 2.00 ± 0.00 | 3.00 ± 1.00 |" in table
    for name in ("sweep_pass_at_1.png", "sweep_speedup_at_1.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    assert read_sweep(tmp_path / "sweep.json") == sweep
