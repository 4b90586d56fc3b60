"""The `GraphStore` contract, run against every implementation (`STORE_IMPLEMENTATIONS` in conftest):
`Neo4jGraphStore` and the routes' `BoundedGraphStore`."""

from __future__ import annotations

import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.errors import (
    ApiKeyNotFoundError,
    ExampleNotFoundError,
    InvalidOperationError,
    TechniqueExistsError,
    TechniqueNotFoundError,
    TransitionNotFoundError,
)
from graphdb.models import (
    Example,
    IngestBatch,
    ReviewQueueFilter,
    ReviewStatus,
    Role,
    StepVerdict,
    Technique,
    TrajectoryRecord,
    content_id,
    utc_now,
)
from graphdb.store import GraphStore, hash_token
from tests.integration.conftest import STORE_IMPLEMENTATIONS, open_store, unit_vector


@pytest.fixture(params=STORE_IMPLEMENTATIONS)
def store(request: pytest.FixtureRequest, clean_graph: Driver, neo4j_target: Neo4jTarget) -> GraphStore:
    """An empty graph behind each `GraphStore` implementation."""
    return open_store(request.param, clean_graph, neo4j_target.database)


def technique(name: str, description: str = "") -> Technique:
    return Technique(name=name, description=description, embedding=unit_vector(name), created_at=utc_now())


def example(
    source: str,
    target: str,
    n: int,
    *,
    speedup: float | None = None,
    code: str | None = None,
    verdict: StepVerdict | None = StepVerdict.PASSED,
) -> Example:
    before = code if code is not None else f"// {source} code {n}\n"
    return Example(
        id=content_id(source, target, str(n)),
        source=source,
        target=target,
        task_id=f"task_{n}",
        code_before=before,
        code_after=f"// {target} code {n}\n",
        code_embedding=unit_vector(before),
        speedup=speedup,
        verdict=verdict if speedup is not None else None,
        created_at=utc_now(),
        source_label=source,
        target_label=target,
    )


def seed(store: GraphStore, names: list[str], examples: list[Example]) -> None:
    store.ingest(IngestBatch(new_techniques=[technique(n) for n in names], examples=examples))


def test_ingest_creates_transitions_with_consistent_stats(store: GraphStore) -> None:
    seed(
        store,
        ["A", "B"],
        [
            example("A", "B", 1, speedup=2.0),
            example("A", "B", 2, speedup=0.5),
            example("A", "B", 3, speedup=4.0),
            example("A", "B", 4),
        ],
    )
    stats = store.get_transition("A", "B").stats
    assert (stats.n_examples, stats.n_verified, stats.n_rejected) == (4, 3, 0)
    assert stats.success_rate == pytest.approx(2 / 3)
    assert stats.mean_speedup == pytest.approx(6.5 / 3)
    assert stats.median_speedup == pytest.approx(2.0)
    assert sorted(store.verified_speedups("A", "B")) == pytest.approx([0.5, 2.0, 4.0])
    assert store.verified_speedups("B", "A") == []
    # Idempotent: the same examples again are skipped, not duplicated.
    result = store.ingest(IngestBatch(examples=[example("A", "B", 1, speedup=2.0)]))
    assert (result.examples_created, result.examples_skipped) == (0, 1)
    assert store.get_transition("A", "B").stats.n_examples == 4


def test_ingest_creates_only_the_missing_transitions_and_counts_them(store: GraphStore) -> None:
    seed(store, ["A", "B", "C"], [example("A", "B", 1, speedup=2.0)])
    result = store.ingest(
        IngestBatch(examples=[example("A", "B", 2, speedup=4.0), example("B", "C", 3, speedup=1.5)])
    )
    assert (result.transitions_created, result.examples_created) == (1, 2)
    assert store.get_transition("A", "B").stats.n_examples == 2
    assert store.get_transition("B", "C").stats.n_examples == 1
    assert store.counts() == {"techniques": 3, "transitions": 2, "examples": 3}


def test_ingest_is_all_or_nothing(store: GraphStore) -> None:
    seed(store, ["A"], [])
    bad = IngestBatch(
        new_techniques=[technique("B")],
        examples=[example("A", "B", 1), example("B", "Nowhere", 2)],
        trajectory=TrajectoryRecord(
            id="t1", task_id="x", model="m", n_steps=2, n_examples_added=2, ingested_at=utc_now()
        ),
    )
    with pytest.raises(TechniqueNotFoundError, match="Nowhere"):
        store.ingest(bad)
    assert store.counts() == {"techniques": 1, "transitions": 0, "examples": 0}
    assert not store.is_trajectory_ingested("t1")


def test_review_move_delete_keep_stats_and_audit(store: GraphStore) -> None:
    seed(store, ["A", "B", "C"], [example("A", "B", 1, speedup=2.0), example("A", "B", 2, speedup=3.0)])
    ex_id = content_id("A", "B", "1")
    rejected = store.set_review_status(ex_id, ReviewStatus.REJECTED, actor="alice", reason="wrong output")
    assert rejected.review_status is ReviewStatus.REJECTED and rejected.review_reason == "wrong output"
    stats = store.get_transition("A", "B").stats
    assert (stats.n_examples, stats.n_rejected, stats.mean_speedup) == (1, 1, pytest.approx(3.0))
    store.set_review_status(ex_id, ReviewStatus.APPROVED, actor="alice")
    moved = store.move_example(ex_id, source="A", target="C", actor="bob")
    assert (moved.source, moved.target) == ("A", "C")
    assert store.get_transition("A", "C").stats.n_examples == 1
    assert store.get_transition("A", "B").stats.n_examples == 1
    store.delete_example(content_id("A", "B", "2"), actor="bob")
    with pytest.raises(TransitionNotFoundError):
        store.get_transition("A", "B")  # no example left: the edge is gone
    with pytest.raises(ExampleNotFoundError):
        store.get_example(content_id("A", "B", "2"))
    actions = [(a.actor, a.action) for a in store.list_audit(target=f"example:{ex_id}")]
    assert actions == [("bob", "example.move"), ("alice", "example.approved"), ("alice", "example.rejected")]


def test_rename_and_merge_move_transitions_and_keep_aliases(store: GraphStore) -> None:
    seed(
        store,
        ["A", "B", "C"],
        [
            example("A", "B", 1, speedup=2.0),
            example("B", "C", 2, speedup=1.5),
            example("A", "C", 3, speedup=3.0),
            example("C", "B", 4, speedup=1.1),
        ],
    )
    renamed = store.rename_technique("B", "B2", actor="carol")
    assert renamed.aliases == ["B"]
    assert store.get_transition("A", "B2").stats.n_examples == 1
    assert store.get_example(content_id("A", "B", "1")).target == "B2"
    with pytest.raises(TechniqueExistsError):
        store.rename_technique("A", "b2", actor="carol")
    merged = store.merge_techniques("C", "B2", actor="carol")
    assert set(merged.aliases) == {"B", "C"}
    with pytest.raises(TechniqueNotFoundError):
        store.get_technique("C")
    # A->B2 gains A->C's example; B2->C and C->B2 both become the self-loop B2->B2.
    assert store.get_transition("A", "B2").stats.n_examples == 2
    loop = store.get_transition("B2", "B2").stats
    assert loop.n_examples == 2 and loop.mean_speedup == pytest.approx(1.3)
    assert store.counts() == {"techniques": 2, "transitions": 2, "examples": 4}
    assert store.find_technique_by_label("c") is not None
    assert store.find_technique_by_label("c").name == "B2"  # type: ignore[union-attr]
    with pytest.raises(InvalidOperationError):
        store.merge_techniques("A", "A", actor="carol")


def test_successors_rank_by_similarity_then_speedup(store: GraphStore) -> None:
    query = "__global__ void k(float* x) { x[i] *= 2; }"
    twin = "__global__ void twin(float* y) { y[i] += 1; }"
    # Two examples with the same code (equal similarity to any query): the faster must come first, and
    # the slower one gets the smaller id, so an id tie-break alone would order them the other way.
    slower, faster = sorted([2, 3], key=lambda n: example("A", "B", n).id)
    seed(
        store,
        ["A", "B", "C"],
        [
            example("A", "B", 1, speedup=1.2, code=query),
            example("A", "B", faster, speedup=9.0, code=twin),
            example("A", "B", slower, speedup=5.0, code=twin),
            example("A", "C", 4, speedup=2.0),
        ],
    )
    options = store.successors("A", unit_vector(query), 3)
    assert [o.transition.target for o in options] == ["B", "C"]
    top = options[0].examples
    assert top[0].example.code_before == query and top[0].similarity == pytest.approx(1.0)
    assert top[1].similarity == pytest.approx(top[2].similarity, abs=1e-6)
    assert [e.example.id for e in top[1:]] == [example("A", "B", faster).id, example("A", "B", slower).id]
    assert len(top) == 3 and top[0].example.code_embedding is None  # embeddings stay in the database
    assert store.successors("C", unit_vector(query), 2) == []
    with pytest.raises(TechniqueNotFoundError):
        store.successors("Nope", unit_vector(query), 2)
    flat = store.similar_examples(unit_vector(query), 1)
    assert flat[0].example.code_before == query


def test_successors_beyond_the_scan_limit_rank_the_best_and_the_nearest(store: GraphStore) -> None:
    query = "the one that matters"
    # The closest example is the oldest and among the slowest, so it is no candidate of a short scan.
    examples = [example("A", "B", 99, speedup=1.01, code=query)]
    examples += [example("A", "B", n, speedup=1.0 + n / 100) for n in range(30)]
    seed(store, ["A", "B"], examples)
    # Only candidates are ranked: the fastest verified examples (and the most recent ones) come first.
    bounded = store.successors("A", unit_vector(query), 30, scan_limit=4)[0].examples
    assert len(bounded) == 4
    assert {content_id("A", "B", str(n)) for n in (29, 28)} <= {s.example.id for s in bounded}
    assert query not in {s.example.code_before for s in bounded}
    # The vector index complements them, so a near-duplicate outside the candidates is found.
    options = store.successors("A", unit_vector(query), 3, scan_limit=5, nearest=10)
    assert options[0].examples[0].example.code_before == query
    # Within the scan limit, every example of the transition is ranked.
    exact = store.successors("A", unit_vector(query), 3, scan_limit=31)
    assert exact[0].examples[0].example.code_before == query


def test_candidates_follow_rejection(store: GraphStore) -> None:
    query = "rejected code"
    seed(
        store, ["A", "B"], [example("A", "B", 1, speedup=3.0, code=query), example("A", "B", 2, speedup=1.5)]
    )
    top = store.successors("A", unit_vector(query), 1)[0].examples[0].example
    assert top.code_before == query
    store.set_review_status(top.id, ReviewStatus.REJECTED, actor="alice", reason="wrong")
    remaining = store.successors("A", unit_vector(query), 2)[0].examples
    assert [s.example.id for s in remaining] == [content_id("A", "B", "2")]


def test_batched_ingestion_keeps_the_same_stats_and_candidates_as_a_full_recompute(store: GraphStore) -> None:
    query = "some code"
    examples = [
        example("A", "B", n, speedup=(0.5 + (n * 37 % 41) / 10) if n % 4 else None, code=f"code {n % 7}")
        for n in range(45)
    ]
    store.ingest(IngestBatch(new_techniques=[technique("A"), technique("B")]))
    # Three batches: the last crosses the point where the candidates stop holding every example.
    for batch in (examples[:10], examples[10:30], examples[30:]):
        store.ingest(IngestBatch(examples=batch))
    stats_added = store.get_transition("A", "B").stats
    candidates_added = {
        s.example.id for s in store.successors("A", unit_vector(query), 45, scan_limit=32)[0].examples
    }
    # Approving an example changes nothing that counts but recomputes everything from the examples.
    store.set_review_status(examples[0].id, ReviewStatus.APPROVED, actor="alice")
    stats_full = store.get_transition("A", "B").stats
    candidates_full = {
        s.example.id for s in store.successors("A", unit_vector(query), 45, scan_limit=32)[0].examples
    }
    assert stats_added.n_examples == stats_full.n_examples == 45
    assert stats_added.n_verified == stats_full.n_verified == len([e for e in examples if e.speedup])
    assert stats_added.mean_speedup == pytest.approx(stats_full.mean_speedup)
    assert stats_added.median_speedup == pytest.approx(stats_full.median_speedup)
    assert stats_added.success_rate == pytest.approx(stats_full.success_rate)
    assert candidates_added == candidates_full and len(candidates_full) <= 32
    fastest = max((e for e in examples if e.speedup), key=lambda e: e.speedup or 0.0)
    assert fastest.id in candidates_full and examples[-1].id in candidates_full


def test_api_keys_are_stored_hashed(store: GraphStore) -> None:
    key, token = store.create_api_key("ci", Role.CURATOR, actor="admin")
    assert key.key_hash == hash_token(token) and token not in key.model_dump_json()
    assert store.lookup_api_key(token).role is Role.CURATOR
    store.revoke_api_key(key.id, actor="admin")
    with pytest.raises(ApiKeyNotFoundError, match="revoked"):
        store.lookup_api_key(token)
    with pytest.raises(ApiKeyNotFoundError):
        store.lookup_api_key("rg_not-a-key")
    assert [k.id for k in store.list_api_keys()] == [key.id]


def test_technique_search_and_duplicates(store: GraphStore) -> None:
    seed(store, [], [])
    store.create_technique(technique("Shared memory tiling", "stage tiles in __shared__"), actor="x")
    store.create_technique(technique("Loop unrolling", "unroll inner loops"), actor="x")
    with pytest.raises(TechniqueExistsError):
        store.create_technique(technique("loop unrolling"), actor="x")
    hits = store.search_techniques_text("tiles shared", 5)
    assert hits[0].technique.name == "Shared memory tiling"
    assert store.search_techniques_text("(((", 5) == []
    nearest = store.nearest_techniques(unit_vector("Loop unrolling"), 1)
    assert nearest[0].technique.name == "Loop unrolling" and nearest[0].score == pytest.approx(1.0, abs=1e-3)


def test_a_pair_kept_separate_is_recorded_once_follows_a_rename_and_goes_with_a_merge(
    store: GraphStore,
) -> None:
    seed(store, ["Tiling", "Register tiling", "Unrolling"], [example("Tiling", "Register tiling", 1)])
    kept = store.keep_separate("Tiling", "Register tiling", actor="carol")
    assert (kept.first, kept.second, kept.by) == ("Register tiling", "Tiling", "carol")
    again = store.keep_separate("Register tiling", "Tiling", actor="dave")
    assert (again.by, again.at) == ("carol", kept.at)
    assert [(k.first, k.second) for k in store.list_kept_separate()] == [("Register tiling", "Tiling")]
    assert ("carol", "technique.keep_separate") in [
        (a.actor, a.action) for a in store.list_audit(target="technique:Register tiling")
    ]
    with pytest.raises(InvalidOperationError):
        store.keep_separate("Tiling", "Tiling", actor="carol")
    with pytest.raises(TechniqueNotFoundError):
        store.keep_separate("Tiling", "Nope", actor="carol")

    # Renamed so that its name now sorts first: still one record, listed in name order.
    store.rename_technique("Tiling", "A tiling", actor="carol")
    store.keep_separate("A tiling", "Register tiling", actor="dave")
    assert [(k.first, k.second, k.by) for k in store.list_kept_separate()] == [
        ("A tiling", "Register tiling", "carol")
    ]
    store.undo_keep_separate("Register tiling", "A tiling", actor="carol")
    assert store.list_kept_separate() == []
    with pytest.raises(InvalidOperationError):
        store.undo_keep_separate("A tiling", "Register tiling", actor="carol")

    store.keep_separate("Unrolling", "A tiling", actor="carol")
    store.merge_techniques("Unrolling", "Register tiling", actor="carol")
    assert store.list_kept_separate() == []


def test_example_summaries_list_what_list_examples_lists_without_code(store: GraphStore) -> None:
    seed(store, ["B", "A"], [example("A", "B", n, speedup=1.5 if n == 2 else None) for n in range(3)])
    store.set_review_status(content_id("A", "B", "1"), ReviewStatus.APPROVED, actor="carol")
    full = store.list_examples(status=ReviewStatus.PENDING, limit=10)
    summaries = store.list_example_summaries(status=ReviewStatus.PENDING, limit=10)
    assert [s.id for s in summaries] == [e.id for e in full] and len(summaries) == 2
    assert [(s.source, s.target, s.task_id, s.speedup) for s in summaries] == [
        (e.source, e.target, e.task_id, e.speedup) for e in full
    ]
    assert [s.id for s in store.list_example_summaries(status=ReviewStatus.PENDING, limit=1, offset=1)] == [
        full[1].id
    ]
    assert store.technique_names() == ["A", "B"]


def test_review_queue_page_reads_the_key_the_queue_and_the_shown_example_at_once(store: GraphStore) -> None:
    seed(
        store,
        ["A", "B", "C"],
        [example("A", "B", n, speedup=float(n + 1)) for n in range(4)] + [example("B", "C", 9, speedup=None)],
    )
    store.set_review_status(content_id("A", "B", "0"), ReviewStatus.APPROVED, actor="carol")
    key, token = store.create_api_key("carol", Role.CURATOR, actor="admin")
    everything = ReviewQueueFilter()

    page = store.review_queue_page(token, limit=100, selected=None, only=everything)
    assert page.key.id == key.id and page.key.role == Role.CURATOR
    assert [s.id for s in page.pending] == [
        s.id for s in store.list_example_summaries(status=ReviewStatus.PENDING, limit=100)
    ]
    assert page.example is not None and page.example.id == page.pending[0].id
    assert page.example.code_after and page.example.code_embedding is None  # in full, but no embedding
    assert page.transition is not None and page.transition.key == "A -> B"
    assert page.transition.stats.n_examples == 4
    assert page.technique_names == sorted(store.technique_names())

    # The selected example when it passes the filter, else the first that does; the same choice as
    # `ReviewQueueFilter.keeps` makes over the list.
    last = content_id("B", "C", "9")
    assert store.review_queue_page(token, limit=100, selected=last, only=everything).example.id == last  # type: ignore[union-attr]
    for only, selected in [
        (ReviewQueueFilter(technique="C"), None),
        (ReviewQueueFilter(transition="A -> B", min_speedup=3.5), content_id("A", "B", "1")),
        (ReviewQueueFilter(transition="A -> B", min_speedup=3.5), content_id("A", "B", "3")),
        (ReviewQueueFilter(task="task_2"), None),
        (ReviewQueueFilter(min_speedup=100.0), None),
    ]:
        page = store.review_queue_page(token, limit=100, selected=selected, only=only)
        shown = [s for s in page.pending if only.keeps(s)]
        expected = next((s.id for s in shown if s.id == selected), shown[0].id if shown else None)
        assert (page.example.id if page.example else None) == expected, only
        assert page.transition is None or page.example is not None
    assert (
        store.review_queue_page(
            token, limit=100, selected=None, only=ReviewQueueFilter(technique="C")
        ).example.id
        == last
    )  # type: ignore[union-attr]

    # Unknown and revoked keys read nothing.
    with pytest.raises(ApiKeyNotFoundError, match="unknown"):
        store.review_queue_page("rg_not-a-key", limit=100, selected=None, only=everything)
    store.revoke_api_key(key.id, actor="admin")
    with pytest.raises(ApiKeyNotFoundError, match="revoked"):
        store.review_queue_page(token, limit=100, selected=None, only=everything)


def test_transitions_of_a_technique_are_those_into_and_out_of_it(store: GraphStore) -> None:
    seed(
        store,
        ["A", "B", "C", "D"],
        [example("A", "B", 1, speedup=2.0), example("B", "C", 2), example("C", "A", 3), example("D", "C", 4)],
    )
    every = store.list_transitions(limit=100)
    for name in ("A", "B", "C", "D"):
        assert store.transitions_of(name) == [t for t in every if name in (t.source, t.target)]
    assert [t.key for t in store.transitions_of("C")] == ["B -> C", "C -> A", "D -> C"]
    assert store.transitions_of("A")[0].stats.n_examples == 1
    assert store.transitions_of("Nowhere") == []
    # What the techniques list and the graph view count in the database instead of reading every transition.
    links = store.technique_links()
    for name in ("A", "B", "C", "D"):
        assert (links[name].out_n, links[name].in_n, links[name].examples_in) == (
            sum(t.source == name for t in every),
            sum(t.target == name for t in every),
            sum(t.stats.n_examples for t in every if t.target == name),
        )
    store.ingest(IngestBatch(examples=[example("B", "C", 5), example("D", "C", 6), example("D", "C", 7)]))
    assert [t.key for t in store.busiest_transitions(2)] == ["D -> C", "B -> C"]
    assert [t.key for t in store.busiest_transitions(10)] == ["D -> C", "B -> C", "A -> B", "C -> A"]
    assert store.busiest_transitions(10)[0].stats.n_examples == 3


def test_best_examples_into_a_technique_are_its_fastest_verified_ones(store: GraphStore) -> None:
    seed(
        store,
        ["A", "B", "C"],
        [
            example("A", "C", 1, speedup=2.0),
            example("A", "C", 2, speedup=5.0),
            example("B", "C", 3, speedup=3.0),
            example("B", "C", 4, speedup=9.0, verdict=StepVerdict.FAILED),
            example("B", "C", 5),
            example("C", "A", 6, speedup=7.0),
        ],
    )
    store.set_review_status(content_id("A", "C", "2"), ReviewStatus.REJECTED, actor="carol")
    best = store.best_examples_into("C", 10)
    assert [e.speedup for e in best] == [3.0, 2.0]  # not the rejected, failed, unmeasured or outgoing
    assert [e.id for e in store.best_examples_into("C", 1)] == [content_id("B", "C", "3")]
    assert store.best_examples_into("Nowhere", 5) == []
