"""The rules that hold an improvement for a curator (issue 33): the fixed limit over the parent GPU
version and the distribution rule (k x the 95th percentile of the transition's verified examples, once it
has N of them), and their settings from the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from search.relabel.construction import HoldSettings, distribution_hold_reason, percentile_95

SEEN = [1.0, 1.2, 1.5, 2.0, 3.0]  # 95th percentile: rank 0.95 x 4 = 3.8, so 2.0 + 0.8 x (3.0 - 2.0) = 2.8


def test_the_95th_percentile_interpolates_between_ranks() -> None:
    assert percentile_95(SEEN) == pytest.approx(2.8)
    assert percentile_95([4.0]) == 4.0
    assert percentile_95(list(map(float, range(1, 101)))) == pytest.approx(95.05)


def test_a_step_beyond_k_times_the_95th_percentile_is_held() -> None:
    reason = distribution_hold_reason(14.5, SEEN, factor=5.0, min_examples=5)  # 14.5 > 5 x 2.8 = 14.0
    assert reason.startswith("held for a curator: 14.5x")
    assert "5 x the 95th percentile (2.80x) of the 5 verified examples" in reason
    assert "distribution rule" in reason
    assert distribution_hold_reason(13.9, SEEN, factor=5.0, min_examples=5) == ""
    assert distribution_hold_reason(14.0, SEEN, factor=5.0, min_examples=5) == ""  # not more than
    assert distribution_hold_reason(8.5, SEEN, factor=3.0, min_examples=5) != ""  # 8.5 > 3 x 2.8


def test_no_distribution_rule_before_the_transition_has_enough_verified_examples() -> None:
    assert distribution_hold_reason(1000.0, SEEN[:4], factor=5.0, min_examples=5) == ""
    assert distribution_hold_reason(1000.0, [], factor=5.0, min_examples=5) == ""
    assert distribution_hold_reason(1000.0, SEEN[:4], factor=5.0, min_examples=4) != ""
    assert distribution_hold_reason(None, SEEN, factor=5.0, min_examples=5) == ""


def test_the_settings_and_their_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = HoldSettings()
    assert (defaults.speedup, defaults.distribution_factor, defaults.distribution_min_examples) == (
        20.0,
        5.0,
        5,
    )
    monkeypatch.setenv("REGRAPH_HOLD_SPEEDUP", "8")
    monkeypatch.setenv("REGRAPH_HOLD_DISTRIBUTION_FACTOR", "3.5")
    monkeypatch.setenv("REGRAPH_HOLD_DISTRIBUTION_MIN_EXAMPLES", "10")
    assert HoldSettings().model_dump() == {
        "speedup": 8.0,
        "distribution_factor": 3.5,
        "distribution_min_examples": 10,
    }
    monkeypatch.setenv("REGRAPH_HOLD_DISTRIBUTION_FACTOR", "0.5")  # would hold every step
    with pytest.raises(ValidationError, match="distribution_factor"):
        HoldSettings()
