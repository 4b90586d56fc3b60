"""The second layer behind the read-only Cypher guard: the READ transaction, against the real Neo4j.

The guard's lexical check and its check of the query plan come first; these tests are about what holds
when they miss a write (the audit found one: a backtick-quoted name holding a quote hid what followed
from the lexical check). Both checks are switched off with monkeypatch so that only the READ access
mode of the transaction stands between the query and the graph, whatever the checks accept or refuse
on a given day.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver

from graphdb import cypher_guard
from graphdb.connection import Neo4jTarget
from graphdb.cypher_guard import run_read_only
from graphdb.errors import CypherRefusedError
from graphdb.models import IngestBatch
from graphdb.store import GraphStore
from tests.integration.graphdb.test_store_conformance import technique

WRITES = [
    "CREATE (x:Intruder {name: 'created'}) RETURN x",
    "MERGE (x:Intruder {name: 'merged'}) RETURN x",
    "MATCH (t:Technique {name: 'A'}) SET t.description = 'vandalised' RETURN t",
    "MATCH (t:Technique {name: 'A'}) REMOVE t.description RETURN t",
    "MATCH (t:Technique {name: 'A'}) DETACH DELETE t",
    # The audit's probe: a quote inside a backtick-quoted label, then a write.
    "MATCH (n:`it's`) CREATE (x:Intruder {name: 'probe'}) RETURN 'done' AS s",
]


def _graph_state(driver: Driver, target: Neo4jTarget) -> list[dict[str, Any]]:
    records, _, _ = driver.execute_query(
        "MATCH (n) WHERE NOT n:SchemaMigration "
        "RETURN labels(n) AS labels, properties(n) AS props ORDER BY elementId(n)",
        database_=target.database,
    )
    return [r.data() for r in records]


@pytest.mark.parametrize("query", WRITES)
def test_the_read_transaction_refuses_a_write_the_check_let_through(
    query: str,
    store: GraphStore,
    clean_graph: Driver,
    neo4j_target: Neo4jTarget,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store.ingest(IngestBatch(new_techniques=[technique("A", "a technique")]))
    before = _graph_state(clean_graph, neo4j_target)
    monkeypatch.setattr(cypher_guard, "check_read_only", lambda query: None)
    monkeypatch.setattr(cypher_guard, "check_plan", lambda *args: None)
    with pytest.raises(CypherRefusedError, match="refused by the server"):
        run_read_only(clean_graph, query, database=neo4j_target.database)
    assert _graph_state(clean_graph, neo4j_target) == before


def test_the_quoted_identifier_probe_writes_nothing_with_both_layers(
    store: GraphStore, clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    # Both layers as deployed: refused by one of them (the check, once it sees through the quoting, or
    # the server), and the graph is unchanged either way.
    store.ingest(IngestBatch(new_techniques=[technique("A", "a technique")]))
    before = _graph_state(clean_graph, neo4j_target)
    with pytest.raises(CypherRefusedError):
        run_read_only(clean_graph, WRITES[-1], database=neo4j_target.database)
    assert _graph_state(clean_graph, neo4j_target) == before
