"""Migration V008 (issue 33): an example written before `held` existed gets `held = false`, so that the
review queue's index (review_status, held, created_at, id) holds it and the queue still lists it."""

from __future__ import annotations

import pytest
from neo4j import Driver

from graphdb import store_queries as q
from graphdb.connection import Neo4jTarget
from graphdb.migrations import discover

pytestmark = pytest.mark.neo4j


def test_v008_gives_held_false_to_the_examples_without_it(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    v008 = next(m for m in discover() if m.version == 8)
    backfill = [s for s in v008.statements if s.startswith("MATCH")]
    assert len(backfill) == 1
    with clean_graph.session(database=neo4j_target.database) as session:
        session.run(
            "CREATE (:Example {id: 'old', review_status: 'pending', created_at: datetime('2026-01-01T00:00:00Z')}), "
            "(:Example {id: 'held', review_status: 'pending', held: true, "
            "created_at: datetime('2026-01-02T00:00:00Z')})"
        ).consume()
        before = session.run(q.LIST_EXAMPLE_SUMMARIES_BY_STATUS, status="pending", offset=0, limit=10).value()
        session.run(backfill[0]).consume()
        held = dict(session.run("MATCH (e:Example) RETURN e.id, e.held").values())
        after = session.run(q.LIST_EXAMPLE_SUMMARIES_BY_STATUS, status="pending", offset=0, limit=10).value()
    assert [e["id"] for e in before] == ["held"]  # the old example is not in the index until V008
    assert held == {"old": False, "held": True}
    assert [e["id"] for e in after] == ["held", "old"]
