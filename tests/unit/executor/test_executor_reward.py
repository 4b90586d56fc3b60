"""The executor's reward (`executor.verdict.reward_for`), the paper's hierarchical reward, by hand."""

from __future__ import annotations

import pytest

from executor.verdict import reward_for
from search.protocols import hierarchical_reward


@pytest.mark.parametrize(
    ("passed", "speedup", "expected"),
    [
        (False, None, -1.0),  # failed (a compile error has no speedup)
        (False, 8.0, -1.0),  # failed a test, however fast
        (True, None, -1.0),  # passed but never timed: no reward for it
        (True, 0.25, -0.75),  # correct but 4x slower: speedup - 1, still above a failure
        (True, 0.999, pytest.approx(-0.001)),
        (True, 1.0, 1.0),  # from 1x on: the speedup itself (a jump from ~0 to 1 at 1x)
        (True, 2.5, 2.5),
    ],
)
def test_reward_matches_hand_values(passed: bool, speedup: float | None, expected: float) -> None:
    assert reward_for(passed, speedup) == expected


@pytest.mark.parametrize("speedup", [0.01, 0.5, 0.999, 1.0, 1.5, 40.0])
def test_executor_and_search_agree_on_every_passing_reward(speedup: float) -> None:
    # The executor's verdict and the search's reward are the same function of a passing candidate.
    assert reward_for(True, speedup) == hierarchical_reward(passed=True, speedup=speedup)
    assert reward_for(False, speedup) == hierarchical_reward(passed=False, speedup=speedup) == -1.0
