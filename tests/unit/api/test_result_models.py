"""The API's result models mirror the search's field by field (`api/optimize/models.py` against
`search.engine`, `search.protocols` and `search.run`): a field added to one side and not the other fails
here, and a whole outcome survives its way onto the wire value for value."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from api.optimize.models import CandidatePublic, EvaluationPublic, OptimizeResult, SearchPublic
from search.engine import Candidate, SearchResult
from search.protocols import Evaluation
from search.run import CandidateCounts, OptimizationOutcome

LEFT_OFF_THE_WIRE: dict[type[BaseModel], frozenset[str]] = {
    # The search's own diagnostics of a candidate; the job result has never carried them. Putting them on
    # the wire is a change of the API (and of its OpenAPI document), not of this mirror.
    Candidate: frozenset({"prompt_note", "generation_s", "evaluation_s"}),
}
"""Fields of a search model that its API mirror leaves out on purpose."""

RENAMED: dict[type[BaseModel], dict[str, str]] = {OptimizationOutcome: {"result": "search"}}
"""Search field -> the API's name for it."""

MIRRORS: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (Evaluation, EvaluationPublic),
    (Candidate, CandidatePublic),
    (SearchResult, SearchPublic),
    (OptimizationOutcome, OptimizeResult),
]


def mirror_mismatch(search: type[BaseModel], api: type[BaseModel]) -> dict[str, list[str]]:
    """The fields that one side has and the other does not (the deliberate differences aside)."""
    renamed = RENAMED.get(search, {})
    expected = {renamed.get(name, name) for name in search.model_fields} - {
        renamed.get(name, name) for name in LEFT_OFF_THE_WIRE.get(search, frozenset())
    }
    found = set(api.model_fields)
    return {"only in the search": sorted(expected - found), "only in the API": sorted(found - expected)}


@pytest.mark.parametrize(("search", "api"), MIRRORS, ids=lambda model: model.__name__)
def test_each_api_result_model_has_exactly_the_fields_of_its_search_model(
    search: type[BaseModel], api: type[BaseModel]
) -> None:
    assert mirror_mismatch(search, api) == {"only in the search": [], "only in the API": []}


def test_the_check_sees_a_field_added_to_either_side() -> None:
    class WiderEvaluation(Evaluation):
        compile_s: float | None = None

    class WiderEvaluationPublic(EvaluationPublic):
        compile_s: float | None = None

    assert mirror_mismatch(WiderEvaluation, EvaluationPublic)["only in the search"] == ["compile_s"]
    assert mirror_mismatch(Evaluation, WiderEvaluationPublic)["only in the API"] == ["compile_s"]
    assert mirror_mismatch(WiderEvaluation, WiderEvaluationPublic)["only in the API"] == []


def _outcome() -> OptimizationOutcome:
    evaluation = Evaluation(
        passed=True, reward=2.0, speedup=3.5, error_kind=None, message="ok", raw={"kind": "passed"}
    )
    candidate = Candidate(
        index=1,
        parent_index=0,
        method="regraph-mcgs",
        phase="expansion",
        path=["sequential code", "Parallelization"],
        technique="Parallelization",
        code="__global__ void k() {}",
        proposal_failure=None,
        failure_kind=None,
        evaluation=evaluation,
        reward=2.0,
        prompt_tokens=120,
        completion_tokens=80,
        model="m",
        backend="replay",
        prompt_note="one example left out",
        generation_s=1.5,
        evaluation_s=0.25,
    )
    result = SearchResult(
        method="regraph-mcgs",
        task_id="saxpy",
        best_code=candidate.code,
        best_path=candidate.path,
        best_reward=2.0,
        best_speedup=3.5,
        best_index=1,
        candidates=[candidate],
        evaluations_used=1,
        tokens_used=200,
        prompt_tokens=120,
        completion_tokens=80,
        iterations=1,
        stop_reason="completed",
        backends=["replay:m"],
        config={"seed": 0},
    )
    return OptimizationOutcome(
        verification="verified",
        note="1 of 1 passed",
        counts=CandidateCounts(total=1, passed=1),
        result=result,
        offered_examples=["ex-1"],
    )


def _without(data: dict[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in fields}


def test_an_outcome_reaches_the_wire_value_for_value() -> None:
    outcome = _outcome()
    wire = OptimizeResult.from_outcome(outcome).model_dump(mode="json")
    expected = outcome.model_dump(mode="json")
    expected["search"] = expected.pop("result")
    left_off = LEFT_OFF_THE_WIRE[Candidate]
    expected["search"]["candidates"] = [_without(c, left_off) for c in expected["search"]["candidates"]]
    assert wire == expected
