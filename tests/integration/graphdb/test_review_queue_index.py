"""The review queue and the lists by review status read their page from the index `example_review_queue_held`
(V008) in its order, the examples held for a curator first, instead of sorting every example of the status: Neo4j's own plans say so.

The graph holds many more examples of the status than a page; PROFILE shows that the index is read only
as far as the page goes.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver

from graphdb import store_queries as q
from graphdb.connection import Neo4jTarget
from graphdb.models import ReviewQueueFilter

PENDING = 600
APPROVED = 1200
PAGE = 25
INDEX = "Example(review_status, held, created_at, id)"
SORTS = {"Sort", "Top", "PartialSort", "PartialTop"}
QUEUE_FILTERS = {"key_hash": "nobody", "selected": None, **ReviewQueueFilter().model_dump()}
QUERIES = {
    "review queue page": (q.REVIEW_QUEUE_PAGE, {**QUEUE_FILTERS, "limit": PAGE}),
    "summaries by status": (q.LIST_EXAMPLE_SUMMARIES_BY_STATUS, {"offset": 0, "limit": PAGE}),
    "examples by status": (q.LIST_EXAMPLES_BY_STATUS, {"offset": PAGE, "limit": PAGE}),
}


def operators(plan: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """Every operator of a plan: its type (without the `@database` suffix), details and arguments."""
    kind = plan["operatorType"].split("@")[0]
    found = [(kind, str(plan.get("args", {}).get("Details", "")), plan)]
    for child in plan.get("children", []):
        found += operators(child)
    return found


@pytest.fixture()
def queue(clean_graph: Driver, neo4j_target: Neo4jTarget) -> Driver:
    """Pending examples among twice as many approved ones, each a second older than the one before."""
    with clean_graph.session(database=neo4j_target.database) as session:
        session.run(
            "UNWIND range(1, $n) AS i CREATE (:Example {id: 'e' + toString(i), held: false, "
            "review_status: CASE WHEN i % 3 = 0 THEN 'pending' ELSE 'approved' END, "
            "created_at: datetime('2026-01-01T00:00:00Z') - duration({seconds: i})})",
            n=PENDING + APPROVED,
        ).consume()
        # As on a graph that has had them for a while: the index statistics count these examples (the
        # planner chooses on them), and no plan made before is reused.
        session.run("CALL db.prepareForReplanning(60)").consume()
    return clean_graph


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_page_is_read_in_the_index_order_without_a_sort(
    queue: Driver, neo4j_target: Neo4jTarget, name: str
) -> None:
    query, params = QUERIES[name]
    with queue.session(database=neo4j_target.database, notifications_min_severity="OFF") as session:
        plan = session.run("EXPLAIN " + query, {**params, "status": "pending"}).consume().plan
    ops = operators(plan)
    seeks = [details for kind, details, _ in ops if kind == "NodeIndexSeek" and INDEX in details]
    assert seeks, f"{name} does not seek the review index: {[kind for kind, _, _ in ops]}"
    assert all("review_status = $status" in s for s in seeks)
    assert any("held = true" in s for s in seeks) and any("held = false" in s for s in seeks)
    sorted_examples = [
        (kind, details) for kind, details, _ in ops if kind in SORTS and "created_at" in details
    ]
    assert not sorted_examples, f"{name} sorts the examples itself: {sorted_examples}"


def test_the_queue_reads_only_its_page_of_the_index_and_the_oldest_first(
    queue: Driver, neo4j_target: Neo4jTarget
) -> None:
    with queue.session(database=neo4j_target.database, notifications_min_severity="OFF") as session:
        result = session.run(
            "PROFILE " + q.REVIEW_QUEUE_PAGE, {**QUEUE_FILTERS, "limit": PAGE, "status": "pending"}
        )
        record = result.single()
        assert record is not None
        profile = result.consume().profile
    seek = next(p for kind, details, p in operators(profile) if kind == "NodeIndexSeek" and INDEX in details)
    assert seek["rows"] <= PAGE + 1, f"read {seek['rows']} of {PENDING} pending examples for a page of {PAGE}"
    # The oldest pending examples: the largest i that is a multiple of 3, downwards.
    oldest = [f"e{i}" for i in range(PENDING + APPROVED, 0, -1) if i % 3 == 0][:PAGE]
    assert [s["id"] for s in record["pending"]] == oldest


def test_a_held_example_is_listed_first_though_created_last(queue: Driver, neo4j_target: Neo4jTarget) -> None:
    """Issue 33: an example held for a curator (a speedup beyond what the graph has seen) heads the
    queue and the lists of its status, whatever its age; the others follow, oldest first."""
    with queue.session(database=neo4j_target.database, notifications_min_severity="OFF") as session:
        session.run(
            "CREATE (:Example {id: 'held-newest', review_status: 'pending', held: true, "
            "created_at: datetime('2026-02-01T00:00:00Z')})"
        ).consume()
        queue_page = session.run(
            q.REVIEW_QUEUE_PAGE, {**QUEUE_FILTERS, "limit": 3, "status": "pending"}
        ).single()
        summaries = session.run(
            q.LIST_EXAMPLE_SUMMARIES_BY_STATUS, {"offset": 0, "limit": 3, "status": "pending"}
        ).value()
        second_page = session.run(
            q.LIST_EXAMPLES_BY_STATUS, {"offset": 1, "limit": 2, "status": "pending"}
        ).value()
    oldest = [f"e{i}" for i in range(PENDING + APPROVED, 0, -1) if i % 3 == 0]
    assert queue_page is not None
    assert [s["id"] for s in queue_page["pending"]] == ["held-newest", *oldest[:2]]
    assert [s["id"] for s in summaries] == ["held-newest", *oldest[:2]]
    assert [s["id"] for s in second_page] == oldest[:2]
