"""Retrieval through a warm candidate cache answers exactly as the database does, whatever was written.

Each test compares a store with its own cache (warmed before the write) with a store that caches
nothing, over the same graph: every curation write must be seen through the cache at once.
"""

from __future__ import annotations

import threading

from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.migrations import discover
from graphdb.models import (
    AliasAddition,
    IngestBatch,
    RelabelDecision,
    RelabelOutcome,
    ReviewStatus,
    SuccessorTransition,
    content_id,
    utc_now,
)
from graphdb.retrieval_cache import CandidateCache
from graphdb.store import Neo4jGraphStore
from tests.integration.conftest import unit_vector
from tests.integration.graphdb.test_store_conformance import example, seed

QUERY = "the code the search is at"


def stores(driver: Driver, target: Neo4jTarget) -> tuple[Neo4jGraphStore, Neo4jGraphStore]:
    """A store with a cache of its own, and one that caches nothing (the database's answer)."""
    cached = Neo4jGraphStore(driver, target.database, candidate_cache=CandidateCache())
    return cached, Neo4jGraphStore(driver, target.database, candidate_cache=CandidateCache(max_bytes=0))


def answer(store: Neo4jGraphStore, technique_name: str, k: int = 10) -> list[SuccessorTransition]:
    return store.successors(technique_name, unit_vector(QUERY), k)


def listed(options: list[SuccessorTransition]) -> dict[str, list[tuple[str, str, str, str]]]:
    """Per successor, its examples as (id, source, target, review status)."""
    return {
        o.transition.target: [
            (s.example.id, s.example.source, s.example.target, s.example.review_status.value)
            for s in o.examples
        ]
        for o in options
    }


def assert_same(cached: Neo4jGraphStore, plain: Neo4jGraphStore, technique_name: str) -> None:
    # Twice through the cache: once reading what the write changed, once from the cache alone.
    for _ in range(2):
        assert answer(cached, technique_name) == answer(plain, technique_name)
        assert answer(cached, technique_name, k=2) == answer(plain, technique_name, k=2)


def test_a_warm_cache_reads_no_candidate_again_and_answers_the_same(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    cached, plain = stores(clean_graph, neo4j_target)
    examples = [example("A", "B", 1, speedup=1.2, code=QUERY)]
    examples += [example("A", "B", n, speedup=1.0 + n) for n in range(2, 7)]
    examples += [example("A", "C", 9, speedup=2.0)]
    seed(cached, ["A", "B", "C"], examples)
    first = cached.successors("A", unit_vector(QUERY), 2)
    stats = cached.candidate_cache.stats()
    assert (stats.transitions_read, stats.transitions_hit, stats.entries) == (2, 0, 2)
    assert (stats.examples_hit, stats.examples_read) == (0, 3)
    again = cached.successors("A", unit_vector(QUERY), 2)
    stats = cached.candidate_cache.stats()
    assert (stats.transitions_read, stats.transitions_hit) == (2, 2)
    assert (stats.examples_hit, stats.examples_read) == (3, 3)
    assert first == again == plain.successors("A", unit_vector(QUERY), 2)
    assert first[0].examples[0].example.code_before == QUERY
    # Another query ranks the cached candidates anew; the text of examples not returned yet is read.
    other = cached.successors("A", unit_vector("other code"), 6)
    assert other == plain.successors("A", unit_vector("other code"), 6)
    assert cached.candidate_cache.stats().transitions_read == 2
    # With the vector index's complement, whose examples are no candidates: the same answer too.
    for _ in range(2):
        bounded = cached.successors("A", unit_vector(QUERY), 2, scan_limit=2, nearest=10)
        assert bounded == plain.successors("A", unit_vector(QUERY), 2, scan_limit=2, nearest=10)
    assert bounded[0].examples[0].example.code_before == QUERY


def test_curation_writes_are_seen_through_a_warm_cache(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    cached, plain = stores(clean_graph, neo4j_target)
    examples = [example("A", "B", 1, speedup=1.5, code=QUERY)]
    examples += [example("A", "B", n, speedup=1.0 + n) for n in range(2, 5)]
    examples += [example("A", "C", 5, speedup=2.0), example("C", "B", 6, speedup=1.1)]
    seed(cached, ["A", "B", "C"], examples)
    top = content_id("A", "B", "1")
    assert listed(answer(cached, "A"))["B"][0] == (top, "A", "B", "pending")

    # Approving changes no candidate, only the text the cache holds.
    cached.set_review_status(top, ReviewStatus.APPROVED, actor="alice")
    assert listed(answer(cached, "A"))["B"][0] == (top, "A", "B", "approved")
    assert_same(cached, plain, "A")

    cached.set_review_status(top, ReviewStatus.REJECTED, actor="alice", reason="wrong output")
    assert top not in {i for i, *_ in listed(answer(cached, "A"))["B"]}
    assert_same(cached, plain, "A")

    moved = content_id("A", "B", "2")
    cached.move_example(moved, source="A", target="C", actor="bob")
    found = listed(answer(cached, "A"))
    assert (moved, "A", "C", "pending") in found["C"] and moved not in {i for i, *_ in found["B"]}
    assert_same(cached, plain, "A")

    deleted = content_id("A", "B", "3")
    cached.delete_example(deleted, actor="bob")
    assert deleted not in {i for i, *_ in listed(answer(cached, "A"))["B"]}
    assert_same(cached, plain, "A")

    # A new example closer to the query than any other comes first.
    newer = example("A", "B", 7, speedup=9.0, code=QUERY)
    cached.ingest(IngestBatch(examples=[newer]))
    assert listed(answer(cached, "A"))["B"][0] == (newer.id, "A", "B", "pending")
    assert_same(cached, plain, "A")

    # A rename changes no candidate, but the ends of every example on its transitions.
    cached.rename_technique("B", "B2", actor="carol", embedding=unit_vector("B2"))
    found = listed(answer(cached, "A"))
    assert set(found) == {"B2", "C"} and {(s, t) for _, s, t, _ in found["B2"]} == {("A", "B2")}
    assert_same(cached, plain, "A")
    assert_same(cached, plain, "C")

    # Merging C into B2: the candidates of A -> C follow to A -> B2, and C -> B2 becomes a self-loop.
    answer(cached, "B2")
    cached.merge_techniques("C", "B2", actor="carol")
    found = listed(answer(cached, "A"))
    assert set(found) == {"B2"}
    assert {content_id("A", "C", "5"), moved} <= {i for i, *_ in found["B2"]}
    assert_same(cached, plain, "A")
    assert listed(answer(cached, "B2")) == {"B2": [(content_id("C", "B", "6"), "B2", "B2", "pending")]}
    assert_same(cached, plain, "B2")


def test_undoing_a_merge_and_importing_a_graph_are_seen_through_a_warm_cache(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    cached, plain = stores(clean_graph, neo4j_target)
    # "T2" was merged into "T" when ingested: its examples sit on A -> T, labeled "T2".
    decision = RelabelDecision(
        id="d1",
        candidate="T2",
        candidate_embedding=unit_vector("T2"),
        matched="T",
        score=0.95,
        outcome=RelabelOutcome.MERGED,
        technique="T",
        decided_by="threshold",
        at=utc_now(),
    )
    merged = [example("A", "T", n, speedup=1.0 + n).model_copy(update={"target_label": "T2"}) for n in (1, 2)]
    seed(cached, ["A", "T"], [example("A", "T", 3, speedup=3.0, code=QUERY)])
    cached.ingest(
        IngestBatch(aliases=[AliasAddition(technique="T", alias="T2")], decisions=[decision], examples=merged)
    )
    assert len(listed(answer(cached, "A"))["T"]) == 3
    cached.undo_decision("d1", actor="curator")
    found = listed(answer(cached, "A"))
    assert {i for i, *_ in found["T2"]} == {e.id for e in merged}
    assert [i for i, *_ in found["T"]] == [content_id("A", "T", "3")]
    assert_same(cached, plain, "A")

    # The same graph exported and imported again: new revisions, the same answers.
    before = answer(cached, "A")
    export = cached.export_graph()
    clean_graph.execute_query("MATCH (n) WHERE NOT n:SchemaMigration DETACH DELETE n")
    cached.import_graph(export, actor="admin")
    assert answer(cached, "A") == before
    assert_same(cached, plain, "A")


def test_a_write_through_another_store_is_seen_by_a_warm_cache(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    # Two processes: one searches with its cache warm, the other curates.
    searching, _ = stores(clean_graph, neo4j_target)
    curating, plain = stores(clean_graph, neo4j_target)
    seed(
        curating,
        ["A", "B"],
        [example("A", "B", 1, speedup=3.0, code=QUERY), example("A", "B", 2, speedup=1.5)],
    )
    top = answer(searching, "A")[0].examples[0].example
    assert top.code_before == QUERY
    curating.set_review_status(top.id, ReviewStatus.REJECTED, actor="alice", reason="wrong")
    assert [i for i, *_ in listed(answer(searching, "A"))["B"]] == [content_id("A", "B", "2")]
    assert_same(searching, plain, "A")


def test_a_cache_too_small_for_every_transition_still_answers_right(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    _, plain = stores(clean_graph, neo4j_target)
    examples = [example("A", t, n, speedup=1.0 + n, code=f"code {n % 3}") for t in "BCDE" for n in range(6)]
    seed(plain, ["A", "B", "C", "D", "E"], examples)
    # Room for about one transition's candidates: each call finds some cached and reads the others.
    small = Neo4jGraphStore(clean_graph, neo4j_target.database, candidate_cache=CandidateCache(20_000))
    for query in ("code 0", "code 1", "code 2", "code 0"):
        assert small.successors("A", unit_vector(query), 3) == plain.successors("A", unit_vector(query), 3)
    stats = small.candidate_cache.stats()
    assert stats.transitions_hit > 0 and stats.transitions_read > 4 and stats.nbytes <= 20_000


def test_transitions_without_a_revision_are_read_every_time_until_the_migration_gives_them_one(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    cached, plain = stores(clean_graph, neo4j_target)
    seed(cached, ["A", "B", "C"], [example("A", "B", 1, speedup=2.0), example("A", "C", 2, speedup=1.5)])
    # As a graph written before V005 holds them.
    clean_graph.execute_query(
        "MATCH ()-[r:TRANSITION]->() REMOVE r.candidates_rev", database_=neo4j_target.database
    )
    assert_same(cached, plain, "A")
    stats = cached.candidate_cache.stats()
    assert (stats.transitions_hit, stats.entries) == (0, 0)
    (v005,) = [m for m in discover() if m.version == 5]
    for statement in v005.statements:
        clean_graph.execute_query(statement, database_=neo4j_target.database)
    missing, _, _ = clean_graph.execute_query(
        "MATCH ()-[r:TRANSITION]->() WHERE r.candidates_rev IS NULL RETURN count(r) AS n",
        database_=neo4j_target.database,
    )
    assert missing[0]["n"] == 0
    assert_same(cached, plain, "A")
    assert cached.candidate_cache.stats().transitions_hit > 0


def test_preloading_reads_every_transition_once_so_later_calls_read_none(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    cached, plain = stores(clean_graph, neo4j_target)
    examples = [example("A", "B", n, speedup=1.0 + n) for n in range(1, 5)]
    examples += [example("A", "C", 9, speedup=2.0), example("B", "C", 10), example("C", "A", 11)]
    seed(cached, ["A", "B", "C", "D"], examples)  # D has no successor
    assert cached.preload_retrieval() == 4
    stats = cached.candidate_cache.stats()
    assert (stats.entries, stats.transitions_read) == (4, 4)
    for name in ["A", "B", "C", "D"]:
        assert answer(cached, name) == answer(plain, name)
    # Every candidate came from the cache: no transition was read again.
    assert cached.candidate_cache.stats().transitions_read == 4


def test_a_preload_told_to_stop_reads_nothing_more(clean_graph: Driver, neo4j_target: Neo4jTarget) -> None:
    cached, _ = stores(clean_graph, neo4j_target)
    seed(cached, ["A", "B"], [example("A", "B", 1), example("B", "A", 2)])
    stop = threading.Event()
    stop.set()  # as AppState.close() does before it closes the driver
    assert cached.preload_retrieval(stop=stop) == 0
    assert cached.candidate_cache.stats().transitions_read == 0
    assert cached.preload_retrieval() == 2  # and without the signal it reads both techniques
