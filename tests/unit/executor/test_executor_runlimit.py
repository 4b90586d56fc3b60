"""The candidate's run limit: derived from the parent's or the reference's time, floored, capped."""

from __future__ import annotations

import pytest

from executor.runlimit import run_limit

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
    assert run_limit(**LIMITS).model_dump() == {"seconds": 300.0, "basis": "cap", "basis_ms": None}
    assert run_limit(**LIMITS, reference_ms=0.0).basis == "cap"
