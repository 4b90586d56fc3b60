"""A step far faster than its parent GPU version enters the graph held for a curator (issue 33): pending,
with the reason, and used by neither the transition's statistics (the search's priors) nor retrieval
until approved. Real embedded Neo4j, real embeddings."""

from __future__ import annotations

import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import IngestBatch, ReviewStatus, Technique, utc_now
from graphdb.store import Neo4jGraphStore
from search.embeddings import shared_embedder
from search.engine import Candidate, SearchResult
from search.mcgs import priors
from search.protocols import INITIAL_TECHNIQUE, Evaluation, SuccessorOption
from search.relabel.construction import GraphImprovements, hold_reason
from search.retrieval import GraphKnowledge

pytestmark = pytest.mark.neo4j

TASK = "held_step_task"
PATH = [INITIAL_TECHNIQUE, "Held test port", "Held test trick"]


def test_the_rule() -> None:
    assert hold_reason(25.0, parent_is_gpu=True).startswith("held for a curator: 25.0x")
    assert hold_reason(19.0, parent_is_gpu=True) == ""
    assert hold_reason(900.0, parent_is_gpu=False) == ""  # a first port from serial code
    assert hold_reason(None, parent_is_gpu=True) == ""
    assert hold_reason(6.0, parent_is_gpu=True, limit=5) != ""


def offered_result(speedups: list[float], tag: str, path: list[str] = PATH, task: str = TASK) -> SearchResult:
    """A search whose best path is `path`, step i of it `speedups[i]` times faster than the serial code."""
    candidates = [
        Candidate(
            index=i,
            parent_index=i - 1 if i else None,
            method="regraph-mcgs",
            phase="expansion",
            path=path[: i + 2],
            technique=path[i + 1],
            code=f"// {tag} step {i}\n__global__ void k(float* x) {{ x[{i}] = 1; }}\n",
            evaluation=Evaluation(passed=True, reward=s, speedup=s, raw={"device": "NVIDIA H200"}),
            reward=s,
            backend="replay",
            model="trajectory:test",
        )
        for i, s in enumerate(speedups)
    ]
    return SearchResult(
        method="regraph-mcgs",
        task_id=task,
        best_code=candidates[-1].code,
        best_path=path,
        best_reward=speedups[-1],
        best_speedup=speedups[-1],
        best_index=len(candidates) - 1,
        candidates=candidates,
        evaluations_used=len(candidates),
        tokens_used=0,
        prompt_tokens=0,
        completion_tokens=0,
        iterations=1,
        stop_reason="completed",
        backends=[],
        config={},
    )


def test_a_step_far_beyond_its_parent_is_held_until_approved(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    embedder = shared_embedder()
    known = set(store.technique_names())
    missing = [n for n in PATH if n not in known]
    if missing:
        vectors = embedder.embed(missing)
        store.ingest(
            IngestBatch(
                new_techniques=[
                    Technique(name=n, embedding=v, created_at=utc_now(), created_by="test")
                    for n, v in zip(missing, vectors, strict=True)
                ],
                examples=[],
                actor="test",
            )
        )
    # 2x over the serial code, then 3x over that (trusted); another path: 2x, then 50x over that (held).
    trusted = GraphImprovements(store, embedder.embed_code, "held-a").offer(
        offered_result([2.0, 6.0], "a"), "// serial\n"
    )
    held = GraphImprovements(store, embedder.embed_code, "held-b").offer(
        offered_result([2.0, 100.0], "b"), "// serial\n"
    )
    examples = [store.get_example(i) for i in trusted + held]
    assert [e.held for e in examples] == [False, False, False, True]
    suspect = examples[3]
    assert (
        suspect.review_status is ReviewStatus.PENDING
        and "50.0x over its parent GPU version" in suspect.review_reason
    )
    stats = store.get_transition(PATH[1], PATH[2]).stats
    # The held example is neither counted nor lends a speedup to the search's priors...
    assert stats.n_examples == 1 and stats.n_verified == 1 and stats.mean_speedup == pytest.approx(3.0)
    # ... and retrieval does not find it, even by its own code.
    query = embedder.embed_code([suspect.code_before])[0]
    assert suspect.id not in [s.example.id for s in store.similar_examples(query, 20)]
    # Approved, it is used like any other example.
    approved = store.set_review_status(
        suspect.id, ReviewStatus.APPROVED, actor="curator", reason="measured again"
    )
    assert not approved.held
    stats = store.get_transition(PATH[1], PATH[2]).stats
    assert stats.n_verified == 2 and stats.mean_speedup == pytest.approx((3.0 + 50.0) / 2)
    assert suspect.id in [s.example.id for s in store.similar_examples(query, 20)]


def test_the_search_s_priors_and_options_ignore_held_steps(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    """MCGS reads a technique's successors through `GraphKnowledge.successors` and turns their
    statistics into priors (`search.mcgs.priors`): a held step changes neither, and a transition that
    only a held step made is not offered at all, until a curator approves."""
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    embedder = shared_embedder()
    names = [INITIAL_TECHNIQUE, "Prior test port", "Prior test trick", "Prior test other", "Prior test only"]
    known = set(store.technique_names())
    missing = [n for n in names if n not in known]
    store.ingest(
        IngestBatch(
            new_techniques=[
                Technique(name=n, embedding=v, created_at=utc_now(), created_by="test")
                for n, v in zip(missing, embedder.embed(missing), strict=True)
            ],
            examples=[],
            actor="test",
        )
    )
    offer = GraphImprovements(store, embedder.embed_code, "prior").offer
    # Two successors of the port, each with a trusted step (the priors of one option are always 1).
    offer(offered_result([2.0, 6.0], "p1", names[:3], "prior_task"), "// serial\n")
    offer(offered_result([2.0, 3.0], "p2", [names[0], names[1], names[3]], "prior_task"), "// serial\n")
    knowledge = GraphKnowledge(store, embedder)
    code = "// parallel\n__global__ void k(float* x) { x[0] = 1; }\n"

    def seen() -> tuple[list[SuccessorOption], list[float]]:
        options = knowledge.successors(names[1], code, 4)
        return options, priors(options, "edge")

    before = seen()
    # Held: 50x over the port on the trick's transition, and 50x on a transition of its own.
    held = offer(offered_result([2.0, 100.0], "p3", names[:3], "prior_task"), "// serial\n")
    only = offer(
        offered_result([2.0, 100.0], "p4", [names[0], names[1], names[4]], "prior_task"), "// serial\n"
    )
    assert store.get_example(held[1]).held and store.get_example(only[1]).held
    assert seen() == before, (seen(), before)
    assert names[4] not in [o.technique for o in before[0]]
    # Approved, the step counts: the trick's statistics move and the new transition is offered.
    store.set_review_status(only[1], ReviewStatus.APPROVED, actor="curator", reason="measured again")
    assert names[4] in [o.technique for o in seen()[0]]
