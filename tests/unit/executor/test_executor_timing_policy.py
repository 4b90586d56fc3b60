"""The adaptive stopping rule of the timing stage and the fast input draws (pure logic, no clocks)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

from executor.checking import TrialPolicy, measure, median_error, robust_cov, timing_stats
from executor.inputs import generate_inputs
from executor.taskformat import FunctionTask, KernelTask, parse_task


def _trials(values: list[float]) -> tuple[list[int], Callable[[int], float]]:
    calls: list[int] = []
    cycle = itertools.cycle(values)

    def trial(i: int) -> float:
        calls.append(i)
        return next(cycle)

    return calls, trial


def test_a_steady_candidate_stops_at_the_minimum() -> None:
    calls, trial = _trials([10.0, 10.01, 9.99])
    samples, stop = measure(
        trial, TrialPolicy(warmup=2, min_trials=5, max_trials=100, min_total_ms=20, target_error=0.01)
    )
    assert stop == "stable" and len(samples) == 5
    assert calls[:2] == [-1, -2]  # warm-up calls are marked and not sampled


def test_scattered_times_run_until_the_trial_limit() -> None:
    _, trial = _trials([10.0, 13.0, 8.0, 11.5, 9.0, 14.0, 7.0])
    samples, stop = measure(
        trial, TrialPolicy(warmup=0, min_trials=5, max_trials=40, min_total_ms=0, target_error=0.005)
    )
    assert stop == "max_trials" and len(samples) == 40
    assert median_error(samples) > 0.005


def test_more_trials_are_taken_until_enough_timed_work() -> None:
    _, trial = _trials([1.0])
    samples, stop = measure(
        trial, TrialPolicy(warmup=0, min_trials=3, max_trials=1000, min_total_ms=50, target_error=0.01)
    )
    assert stop == "stable" and len(samples) == 50


def test_without_a_target_the_fixed_rule_applies() -> None:
    _, trial = _trials([10.0, 30.0])
    samples, stop = measure(
        trial, TrialPolicy(warmup=0, min_trials=4, max_trials=100, min_total_ms=0, target_error=0)
    )
    assert stop == "min_time" and len(samples) == 4


def test_stats_carry_trials_spread_and_stop() -> None:
    stats = timing_stats([10.0, 10.0, 10.0, 50.0], stop="time_cap")
    assert stats.trials == 4 and stats.median_ms == 10.0 and stats.stop == "time_cap"
    assert stats.cov > 0.5  # one stray trial inflates std/mean ...
    assert stats.robust_cov == 0.0 == robust_cov([10.0, 10.0, 10.0, 50.0])  # ... but not the MAD


def _task(dtype: str, generator: dict[str, object]) -> FunctionTask | KernelTask:
    ctype = {"uint8": "unsigned char", "int32": "int", "float32": "float"}[dtype]
    return parse_task(
        {
            "kind": "function",
            "id": "draws",
            "entry": "f",
            "signature": f"void f(int n, const {ctype}* x, float* y)",
            "params": {"n": {"test": 200000, "timing": 200000}},
            "args": [
                {"name": "n", "kind": "scalar", "dtype": "int32", "value": "n"},
                {
                    "name": "x",
                    "kind": "array",
                    "dtype": dtype,
                    "size": "n",
                    "intent": "in",
                    "generator": generator,
                },
                {"name": "y", "kind": "array", "dtype": "float32", "size": "n", "intent": "out"},
            ],
        }
    )


@pytest.mark.parametrize(
    ("dtype", "generator", "low", "high"),
    [
        ("uint8", {"dist": "randint", "low": 0, "high": 256}, 0, 255),
        ("uint8", {"dist": "uniform", "low": 3, "high": 9}, 3, 9),
        ("int32", {"dist": "randint", "low": -5, "high": 5}, -5, 4),
        ("int32", {"dist": "sorted_uniform", "low": 0, "high": 1000}, 0, 1000),
    ],
)
def test_integer_draws_cover_their_range_in_their_type(
    dtype: str, generator: dict[str, object], low: int, high: int
) -> None:
    x = generate_inputs(_task(dtype, generator), "test", seed=7).arrays["x"]
    assert x.dtype == np.dtype(dtype) and x.size == 200000
    assert int(x.min()) == low and int(x.max()) == high
    if generator["dist"] == "sorted_uniform":
        assert bool(np.all(np.diff(x) >= 0))


def test_float32_draws_stay_half_open_and_vary_with_the_seed() -> None:
    task = _task("float32", {"dist": "uniform", "low": -1.0, "high": 1.0})
    a = generate_inputs(task, "test", seed=1).arrays["x"]
    assert a.dtype == np.float32
    assert float(a.min()) >= -1.0 and float(a.max()) < 1.0
    assert abs(float(a.mean())) < 0.01
    assert not np.array_equal(a, generate_inputs(task, "test", seed=2).arrays["x"])
    assert np.array_equal(a, generate_inputs(task, "test", seed=1).arrays["x"])
    normal = generate_inputs(_task("float32", {"dist": "normal", "mean": 5.0, "std": 2.0}), "test", seed=3)
    values = normal.arrays["x"]
    assert values.dtype == np.float32 and abs(float(values.mean()) - 5.0) < 0.05
    assert abs(float(values.std()) - 2.0) < 0.05


def test_warm_up_lasts_its_wall_time_not_only_its_count() -> None:
    """A short kernel needs many untimed launches before the GPU's clocks are up: warm-up is timed."""
    import time as _time

    calls: list[tuple[int, float]] = []

    def trial(i: int) -> float:
        calls.append((i, _time.perf_counter()))
        _time.sleep(0.002)
        return 1.0

    began = _time.perf_counter()
    measure(trial, TrialPolicy(warmup=1, warmup_ms=20, min_trials=3, max_trials=3, min_total_ms=0))
    warm = [i for i, _ in calls if i < 0]
    first_timed = next(t for i, t in calls if i == 0)
    assert len(warm) > 1  # more than the one counted call
    assert first_timed - began >= 0.020  # no timed trial before 20 ms of warm-up
    assert warm == list(range(-1, -len(warm) - 1, -1)) and [i for i, _ in calls[len(warm) :]] == [0, 1, 2]
