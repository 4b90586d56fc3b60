"""bench.probes.scaling_records: the leading burst, what kept the trials going, the replicas' chains."""

from __future__ import annotations

from typing import Any

from bench.probes.scaling_records import _covered, binding, chains, leading_burst, replay_from, turn_windows
from bench.probes.stop_rule_replay import host_policy


def test_a_leading_burst_is_counted_up_to_the_first_two_trials_back_at_the_median() -> None:
    assert leading_burst([30.0, 20.0, 25.0, 9.0, 1.0, 1.0, 1.0], 1.0) == 4
    assert leading_burst([1.0, 1.0, 30.0, 30.0, 1.0], 1.0) == 0  # slow later on: not a leading burst
    assert leading_burst([3.0, 3.0, 3.0], 1.0) == 3  # never back within the recorded trials


def test_what_kept_the_trials_going_is_read_from_the_prefix_before_the_last() -> None:
    policy = host_policy()
    quiet = {"samples_ms": [10.0] * 5, "trials": 5}
    assert binding(quiet, policy) == "min_trials"
    short = {"samples_ms": [1.0] * 20, "trials": 20}
    assert binding(short, policy) == "min_total_ms"
    noisy = {"samples_ms": [40.0, 30.0, 10.0, 20.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0], "trials": 10}
    assert binding(noisy, policy) == "noise"
    assert binding({"samples_ms": [10.0] * 40, "trials": 55}, policy) == ">40"
    assert replay_from([10.0] * 8, policy) == 5


def test_turns_that_overlap_go_to_different_replicas() -> None:
    def rec(finished: float, held: float) -> dict[str, Any]:
        return {"finished_s": finished, "seconds": {"gpu_held": held, "after_release": 0.0}}

    a, b, c, d = rec(1.0, 1.0), rec(1.5, 1.0), rec(2.0, 1.0), rec(2.5, 1.0)
    given = {id(r): i for r, _, i in chains([a, b, c, d], 2)}
    assert given[id(a)] != given[id(b)]
    assert given[id(a)] == given[id(c)] and given[id(b)] == given[id(d)]
    window = turn_windows(rec(5.0, 2.0))
    assert window is not None and window[:2] == (3.0, 5.0)


def test_a_wait_is_covered_by_the_union_of_the_other_replicas_spans() -> None:
    # overlapping spans count once; a span outside the wait counts not at all
    assert abs(_covered((0.0, 1.0), [(0.2, 0.5), (0.4, 0.7), (2.0, 3.0), (-1.0, 0.1)]) - 0.6) < 1e-9
    assert _covered((1.0, 1.0), [(0.0, 2.0)]) == 0.0
