"""A verdict says what its timed calls ran on when page-locked host memory was asked for, in one field
whose values cannot be confused (review 45 F9: ``seconds["host_page_locked"]`` is 0 both for arrays
never locked and for locks the candidate removed during its trials)."""

from __future__ import annotations

import pytest

from executor.verdict import Stage, Verdict, host_memory_state


@pytest.mark.parametrize(
    ("seconds", "state"),
    [
        ({}, None),
        ({"host_page_locked": 1.0, "host_locked_bytes": 4096.0}, "page_locked"),
        ({"host_page_locked": 0.0, "host_lock_failed": 1.0}, "pageable_lock_refused"),
        ({"host_page_locked": 0.0, "host_lock_failed": 1.0, "host_lock_over_cap": 1.0}, "pageable_over_cap"),
        ({"host_page_locked": 0.0, "host_locked_bytes": 4096.0, "host_locks_lost": 2.0}, "locks_lost"),
    ],
)
def test_the_host_memory_of_a_verdict_names_each_case(seconds: dict[str, float], state: str | None) -> None:
    assert host_memory_state(seconds) == state
    verdict = Verdict(task_id="t", stage=Stage.TIMING, passed=False, error="wrong_output", seconds=seconds)
    on_the_wire = verdict.model_dump(mode="json")
    assert on_the_wire["host_memory"] == state
    # A verdict read back (a fleet's replica to its router, a stored record) says the same.
    assert Verdict.model_validate(on_the_wire).host_memory == state
    assert "host_memory" in Verdict.model_json_schema(mode="serialization")["properties"]
