"""The candidate's run limit: derived from the parent's or the reference's time, floored, capped; and the
limit of each of its calls."""

from __future__ import annotations

import pytest

from executor.runlimit import call_limit, run_limit

LIMITS = {"cap_s": 300.0, "floor_s": 5.0, "factor": 10.0, "calls": 6, "timing_budget_s": 2.2}


def test_a_typical_task_gets_seconds_not_minutes() -> None:
    limit = run_limit(**LIMITS, reference_ms=80.0)
    assert limit.basis == "reference" and limit.basis_ms == 80.0
    assert limit.seconds == pytest.approx(10 * 0.080 * 6 + 2.2)  # 7.0 s


def test_the_parent_time_wins_over_the_reference() -> None:
    limit = run_limit(**LIMITS, reference_ms=80.0, parent_ms=200.0)
    assert limit.basis == "parent" and limit.seconds == pytest.approx(10 * 0.2 * 6 + 2.2)


def test_a_fast_task_gets_the_floor_and_a_slow_one_the_cap() -> None:
    fast = run_limit(**LIMITS, reference_ms=0.05)
    assert (fast.basis, fast.seconds) == ("floor", 5.0)
    slow = run_limit(**LIMITS, reference_ms=10_000.0)
    assert (slow.basis, slow.seconds, slow.basis_ms) == ("cap", 300.0, 10_000.0)


def test_nothing_measured_keeps_the_cap() -> None:
    limit = run_limit(**LIMITS, call_floor_s=2.0)
    assert (limit.seconds, limit.basis, limit.basis_ms, limit.call) == (300.0, "cap", None, None)
    assert run_limit(**LIMITS, reference_ms=0.0).basis == "cap"


def test_each_call_gets_the_floor_plus_factor_times_the_time_per_call() -> None:
    limit = run_limit(**LIMITS, reference_ms=80.0, call_floor_s=2.0)
    call = limit.call
    assert call is not None and (call.basis, call.basis_ms, call.floor_s) == ("reference", 80.0, 2.0)
    assert call.seconds == pytest.approx(2.0 + 10 * 0.080) == call.for_calls(1)
    assert call.for_calls(64) == pytest.approx(2.0 + 64 * 10 * 0.080)  # a batch: the floor once
    assert call.describe(64) == "2s floor + 64 x 10 x the reference's 80 ms per call"
    assert run_limit(**LIMITS, reference_ms=80.0).call is None  # no call floor given: no call limit


def test_the_call_limit_follows_the_parent_and_survives_floor_and_cap() -> None:
    parent = call_limit(floor_s=2.0, factor=10.0, reference_ms=80.0, parent_ms=0.5)
    assert parent is not None and parent.basis == "parent" and parent.seconds == pytest.approx(2.005)
    assert run_limit(**LIMITS, reference_ms=0.05, call_floor_s=2.0).call is not None  # run: floor
    capped = run_limit(**LIMITS, reference_ms=10_000.0, call_floor_s=2.0)
    assert capped.basis == "cap" and capped.call is not None and capped.call.seconds == pytest.approx(102.0)
    assert call_limit(floor_s=2.0, factor=10.0, reference_ms=0.0) is None
