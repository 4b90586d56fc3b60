"""A job's outcome says why its search stopped before its evaluation budget (issue 31: a compile-only
job stopped after 1 of 6 evaluations, "exhausted", without a word why)."""

from __future__ import annotations

from search.engine import SearchResult
from search.run import count_candidates, describe_result


def _result(stop_reason: str, used: int) -> SearchResult:
    return SearchResult(
        method="mcgs",
        task_id="t",
        best_code=None,
        best_path=None,
        best_reward=None,
        best_speedup=None,
        best_index=None,
        candidates=[],
        evaluations_used=used,
        tokens_used=0,
        prompt_tokens=0,
        completion_tokens=0,
        iterations=1,
        stop_reason=stop_reason,
        backends=[],
        config={"evaluation_budget": 6},
    )


def test_an_exhausted_compile_only_search_says_why_it_stopped() -> None:
    result = _result("exhausted", 1)
    note = describe_result(result, "compile-only", count_candidates(result.candidates))
    assert "stopped after 1 of 6 evaluations" in note
    assert "compile-only mode no candidate is run" in note


def test_an_exhausted_verified_search_and_a_token_budget_say_why() -> None:
    note = describe_result(_result("exhausted", 3), "verified", count_candidates([]))
    assert "stopped after 3 of 6 evaluations with nothing left to explore" in note
    note = describe_result(_result("token_budget", 2), "verified", count_candidates([]))
    assert "token budget" in note


def test_a_spent_evaluation_budget_adds_nothing() -> None:
    for reason in ("evaluation_budget", "completed"):
        note = describe_result(_result(reason, 6), "compile-only", count_candidates([]))
        assert "stopped after" not in note
