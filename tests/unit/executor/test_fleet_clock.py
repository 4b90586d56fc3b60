"""An evaluation's deadline crossing from the fleet's router to a replica on another host
(`executor.fleet.router.clock_offset` and `replica_deadline`, `executor.fleet.replica.local_deadline`
and `skipped_answer`): it means the same instant there whatever the replica host's wall clock says, and
the time it waited in the replica's actor queue still counts. Each host's clocks are numbers the test
sets by hand (no sleeps, no second host); the round trip to the replica takes 20 ms each way."""

from __future__ import annotations

import pytest

from executor.fleet.replica import EXPIRED, EarlyCancels, local_deadline, skipped_answer
from executor.fleet.router import clock_offset, replica_deadline

LIMIT_S = 900.0  # the request limit (REQUEST_TIMEOUT_S's default)
HOP_S = 0.02  # one way from the router to the replica, or back


class Host:
    """One host's two clocks, moved on together."""

    def __init__(self, wall: float, monotonic: float) -> None:
        self.wall, self.monotonic = wall, monotonic

    def later(self, seconds: float) -> Host:
        return Host(self.wall + seconds, self.monotonic + seconds)


def _left_on_replica(skew: float, queued_s: float) -> tuple[float, str | None]:
    """The replica's seconds left, and what it answers, when an evaluation whose request was accepted
    10 s before it was sent (its deadline LIMIT_S after that) starts there after ``queued_s`` in its
    actor's queue, the replica host's wall clock ``skew`` ahead of the router's."""
    router = Host(wall=1_790_000_000.0, monotonic=5_000.0)
    replica = Host(wall=router.wall + skew, monotonic=42.0)
    # the router measures the replica's clock: asked now, read there one hop later, answered two hops later
    offset = clock_offset(router.wall, replica.later(HOP_S).wall, router.later(2 * HOP_S).wall)
    deadline = router.monotonic + LIMIT_S  # accepted now (executor.app.request_deadline)
    sent = router.later(10.0)
    there = replica_deadline(deadline, offset, sent.monotonic, sent.wall)
    starts = replica.later(10.0 + HOP_S + queued_s)
    local = local_deadline(there, starts.wall, starts.monotonic)
    answer = skipped_answer(EarlyCancels(2 * LIMIT_S, clock=lambda: starts.monotonic), "token", local)
    return local - starts.monotonic, answer


@pytest.mark.parametrize("skew", [0.0, 60.0, 899.0, 900.0, 3600.0, -3600.0])
def test_a_deadline_means_the_same_instant_on_a_replica_whose_clock_is_off(skew: float) -> None:
    """Started at once, the evaluation has what is left of its limit (less the hop), to within the
    measure's error (half the round trip), whatever the skew; seen failing with the replica's clock
    taken to agree with the router's (offset 0: review 33's finding, 840 s left at a 60-s skew, an
    ``expired`` answer at once from 900 s on)."""
    left, answer = _left_on_replica(skew, queued_s=0.0)
    assert left == pytest.approx(LIMIT_S - 10.0 - HOP_S, abs=HOP_S), (skew, left)
    assert answer is None, (skew, answer)


@pytest.mark.parametrize("skew", [0.0, 3600.0, -3600.0])
def test_the_wait_in_the_replicas_queue_counts_against_the_deadline(skew: float) -> None:
    """An evaluation that waited in the replica's actor queue has that much less left when it starts,
    and one that waited past its deadline is dropped (what a deadline given as seconds left, turned
    into the replica's deadline only when its call starts, would miss: the queue comes before)."""
    left, answer = _left_on_replica(skew, queued_s=300.0)
    assert left == pytest.approx(LIMIT_S - 10.0 - HOP_S - 300.0, abs=HOP_S), (skew, left)
    assert answer is None
    left, answer = _left_on_replica(skew, queued_s=LIMIT_S)
    assert left < 0 and answer == EXPIRED, (skew, left, answer)
