"""Export/import round trip and the read-only Cypher guard, against the real embedded Neo4j."""

from __future__ import annotations

from pathlib import Path

import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.cypher_guard import check_read_only, run_read_only
from graphdb.errors import CypherQueryError, CypherRefusedError, ExportFormatError, ImportConflictError
from graphdb.export import export_to_file, import_from_file, read_export
from graphdb.models import IngestBatch, ReviewStatus, Role
from graphdb.store import GraphStore
from search.protocols import INITIAL_TECHNIQUE
from tests.integration.conftest import unit_vector
from tests.integration.graphdb.test_store_conformance import example, seed, technique


def populate(store: GraphStore) -> None:
    seed(
        store,
        ["A", "B", "C"],
        [example("A", "B", 1, speedup=2.0), example("B", "C", 2, speedup=0.7), example("C", "A", 3)],
    )
    store.set_review_status(example("B", "C", 2).id, ReviewStatus.REJECTED, actor="alice", reason="slow")
    store.rename_technique("C", "C2", actor="bob", embedding=unit_vector("C2"))
    store.create_api_key("reader", Role.READER, actor="admin")
    store.ingest(IngestBatch(new_techniques=[technique("D", "lonely")]))
    store.keep_separate("D", "B", actor="carol")


def test_export_import_round_trip_is_exact(store: GraphStore, clean_graph: Driver, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "graph.json"
    before = export_to_file(store, path)
    # API keys are the deployment's, not the graph's: an export holds none (issue 27).
    assert len(before.examples) == 3 and len(before.audit) >= 3 and before.api_keys == []
    with pytest.raises(ImportConflictError):
        import_from_file(store, path, actor="admin")
    clean_graph.execute_query("MATCH (n) WHERE NOT n:SchemaMigration DETACH DELETE n")
    import_from_file(store, path, actor="admin")
    after = store.export_graph()
    assert after.model_dump(exclude={"exported_at", "audit"}) == before.model_dump(
        exclude={"exported_at", "audit"}
    )
    # The audit log is as exported, plus the import itself.
    assert [a for a in after.audit if a.action != "graph.import"] == before.audit
    assert [(a.actor, a.target) for a in after.audit if a.action == "graph.import"] == [("admin", "graph")]
    # The pairs a curator kept apart come back as pairs of the graph, not only as lines of the file.
    assert [(k.first, k.second, k.by) for k in store.list_kept_separate()] == [("B", "D", "carol")]
    assert store.list_kept_separate() == before.kept_separate
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    with pytest.raises(ExportFormatError):
        read_export(tmp_path / "bad.json")


def test_import_keeps_the_deployments_keys_and_audit_and_replaces_the_initial_node(
    store: GraphStore, clean_graph: Driver
) -> None:
    populate(store)
    store.ingest(IngestBatch(new_techniques=[technique(INITIAL_TECHNIQUE, "exported description")]))
    before = store.export_graph()
    # A fresh deployment: its own keys, audit log and an initial node, but no knowledge.
    clean_graph.execute_query(
        "MATCH (n) WHERE n:Technique OR n:Example OR n:RelabelDecision OR n:Trajectory DETACH DELETE n"
    )
    store.ingest(IngestBatch(new_techniques=[technique(INITIAL_TECHNIQUE, "local description")]))
    _, admin_token = store.create_api_key("local-admin", Role.ADMIN, actor="bootstrap")
    store.import_graph(before, actor="local-admin")
    after = store.export_graph()
    assert after.techniques == before.techniques  # the exported initial node replaced the local one
    assert after.examples == before.examples and after.transitions == before.transitions
    assert store.lookup_api_key(admin_token).name == "local-admin"  # the deployment's key stays
    assert after.api_keys == []
    assert {a.id for a in before.audit} <= {a.id for a in after.audit}
    assert len({a.id for a in after.audit}) == len(after.audit)
    with pytest.raises(ImportConflictError, match="example"):
        store.import_graph(before, actor="local-admin")


def test_import_refuses_pairs_kept_apart_that_name_a_missing_technique(
    store: GraphStore, clean_graph: Driver
) -> None:
    populate(store)
    export = store.export_graph()
    clean_graph.execute_query("MATCH (n) WHERE NOT n:SchemaMigration DETACH DELETE n")
    broken = export.model_copy(
        update={"kept_separate": [k.model_copy(update={"second": "Nowhere"}) for k in export.kept_separate]}
    )
    with pytest.raises(ImportConflictError, match="'Nowhere'"):
        store.import_graph(broken, actor="admin")
    assert store.counts()["techniques"] == 0  # nothing half-imported


@pytest.mark.parametrize(
    "query",
    [
        "CREATE (n:Technique {name: 'x'})",
        "MATCH (t:Technique) MERGE (t)-[:X]->(t)",
        "MATCH (t:Technique) SET t.name = 'y'",
        "MATCH (t) DETACH DELETE t",
        "MATCH (t) DELETE t",
        "MATCH (t:Technique) REMOVE t.description",
        "CALL dbms.components()",
        "CALL db.createLabel('X')",
        "call dbms.security.listUsers()",
        "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
        "MATCH (t) CALL (t) { RETURN 1 AS x } IN TRANSACTIONS OF 10 ROWS RETURN x",
        "USE system SHOW USERS",
        "CREATE INDEX foo FOR (n:X) ON (n.y)",
        "DROP INDEX technique_embedding",
        "SHOW INDEXES",
        "MATCH (n) FOREACH (x IN [1] | SET n.y = x)",
        "CALL apoc.periodic.iterate('a', 'b', {})",
    ],
)
def test_guard_refuses_writes_and_admin(query: str) -> None:
    with pytest.raises(CypherRefusedError, match="refused"):
        check_read_only(query)


def test_guard_ignores_keywords_inside_strings_and_properties() -> None:
    check_read_only(
        "MATCH (t:Technique) WHERE t.description CONTAINS 'CREATE INDEX; DELETE' RETURN t.name // SET"
    )
    check_read_only("MATCH (e:Example) RETURN e.created_at, e.review_status")
    check_read_only(
        "CALL db.index.fulltext.queryNodes('technique_text', 'tiling') YIELD node RETURN node.name"
    )


def test_read_queries_run_with_row_limit_and_timeout(
    store: GraphStore, clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    populate(store)
    result = run_read_only(
        clean_graph,
        "MATCH (t:Technique) RETURN t.name AS name, t ORDER BY name",
        database=neo4j_target.database,
        row_limit=2,
    )
    assert result.columns == ["name", "t"] and result.truncated
    assert [r["name"] for r in result.rows] == ["A", "B"]
    assert result.rows[0]["t"]["_labels"] == ["Technique"]
    params = run_read_only(
        clean_graph,
        "MATCH (t:Technique {name: $n}) RETURN t.description AS d",
        {"n": "D"},
        database=neo4j_target.database,
    )
    assert params.rows == [{"d": "lonely"}] and not params.truncated
    with pytest.raises(CypherQueryError):
        run_read_only(clean_graph, "MATCH (n RETURN n", database=neo4j_target.database)
    slow = "UNWIND range(1, 100000000) AS x WITH x WHERE x % 7 = 12 RETURN count(x) AS c"
    with pytest.raises(CypherQueryError, match=r"ran past|failed"):
        run_read_only(clean_graph, slow, database=neo4j_target.database, timeout_s=0.5)
