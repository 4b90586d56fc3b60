"""The one reward formula (`executor.protocol.reward_for`), on hand-computed cases."""

from __future__ import annotations

import pytest

from executor.protocol import reward_for


@pytest.mark.parametrize(
    ("passed", "speedup", "reward"),
    [
        (True, 4.0, 4.0),  # faster: the speedup itself
        (True, 1.0, 1.0),  # as fast as the serial reference counts as faster
        (True, 1.5, 1.5),
        (True, 0.25, -0.75),  # slower: speedup - 1, in (-1, 0)
        (True, 0.5, -0.5),
        (False, None, -1.0),  # any failure
        (False, 8.0, -1.0),  # a measured speedup does not rescue a failed candidate
        (True, None, -1.0),  # passed but never timed: nothing is known about its speed
    ],
)
def test_reward_for(passed: bool, speedup: float | None, reward: float) -> None:
    assert reward_for(passed, speedup) == pytest.approx(reward)


def test_a_slow_correct_candidate_beats_a_broken_one() -> None:
    assert reward_for(False, None) < reward_for(True, 1e-6) < reward_for(True, 0.999) < reward_for(True, 1.0)
