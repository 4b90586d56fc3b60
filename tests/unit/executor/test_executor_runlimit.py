"""The candidate's run limit: derived from the parent's or the reference's time, floored, capped; and the
limit of each of its calls."""

from __future__ import annotations

import pytest

from executor.runlimit import call_limit, run_limit
from executor.worker.messages import CALL_ENDED, CallBeat, call_started, read_beat

LIMITS = {"cap_s": 300.0, "floor_s": 5.0, "factor": 10.0, "calls": 6, "timing_budget_s": 2.2}


def test_a_typical_task_gets_seconds_not_minutes() -> None:
    limit = run_limit(**LIMITS, reference_ms=80.0)
    assert limit.basis == "reference" and limit.basis_ms == 80.0
    assert limit.seconds == pytest.approx(10 * 0.080 * 6 + 2.2)  # 7.0 s


def test_the_confirming_calls_processes_are_added_to_what_the_run_may_need() -> None:
    """Session 40: up to three confirming calls, each in a fresh runner, after the trials. A fast task
    whose floor held one no longer held three (the GPU corpus's value memo: killed at 5.9 s during
    timing): their allowance is added to the derived limit, which the floor no longer hides."""
    assert run_limit(**LIMITS, reference_ms=80.0, confirm_s=6.0).seconds == pytest.approx(7.0 + 6.0)
    fast = run_limit(**LIMITS, reference_ms=0.05, confirm_s=6.0)
    assert fast.basis == "reference" and fast.seconds == pytest.approx(10 * 0.00005 * 6 + 2.2 + 6.0)
    assert run_limit(**{**LIMITS, "floor_s": 60.0}, reference_ms=0.05, confirm_s=6.0).seconds == 60.0
    assert run_limit(**LIMITS, reference_ms=10_000.0, confirm_s=6.0).seconds == 300.0  # the cap holds


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


def test_a_trial_limit_follows_the_candidates_own_earlier_calls_when_they_are_faster() -> None:
    call = call_limit(floor_s=2.0, factor=10.0, reference_ms=200.0)
    assert call is not None
    assert call.for_calls(64) == pytest.approx(2.0 + 64 * 10 * 0.2)  # 130 s: past any run limit
    assert call.for_calls(64, seen_ms=0.05) == pytest.approx(2.0 + 64 * 10 * 0.05e-3)
    assert call.for_calls(64, seen_ms=500.0) == call.for_calls(64)  # never above the basis
    assert "0.05 ms per call, its own slowest so far in these trials" in call.describe(64, 0.05)
    assert call.describe(1, 200.0) == "2s floor + 10 x the reference's 200 ms per call"
    # The time per call is announced exactly: the parent tells the basis from the candidate's own times.
    beat = read_beat(call_started(2.0, 1, call.per_call_ms(), "x").rstrip(b"\n"))
    assert beat is not None and beat.per_call_ms == 200.0
    assert read_beat(call_started(2.0, 1, 1 / 3, "x").rstrip(b"\n")) == CallBeat(True, 2.0, 1, 1 / 3, "x")


def test_call_announcements_read_back_and_anything_else_is_ignored() -> None:
    line = call_started(2.5, 64, 0.05, "timed batch of 64\nlaunches")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    beat = read_beat(line.rstrip(b"\n"))
    assert beat == CallBeat(
        started=True, limit_s=2.5, calls=64, per_call_ms=0.05, what="timed batch of 64 launches"
    )
    assert read_beat(CALL_ENDED.rstrip(b"\n")) == CallBeat(started=False)
    for noise in (b"", b"call", b"call x 1 1 a", b"call 0 1 1 a", b"call inf 1 1 a", b"hello 1 1 1 a"):
        assert read_beat(noise) is None, noise
