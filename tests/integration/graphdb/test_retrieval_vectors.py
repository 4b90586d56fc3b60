"""Retrieval over examples stored before their packed code vector existed ranks them the same way."""

from __future__ import annotations

from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import IngestBatch
from graphdb.retrieval_cache import CandidateCache
from graphdb.store import Neo4jGraphStore
from tests.integration.conftest import unit_vector
from tests.integration.graphdb.test_store_conformance import example, technique


def test_examples_without_a_packed_vector_are_ranked_from_their_float_list(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    # No candidate cache: the second call must read the vectors again, the way an older graph holds them.
    store = Neo4jGraphStore(clean_graph, neo4j_target.database, candidate_cache=CandidateCache(max_bytes=0))
    query = "the code we ask about"
    examples = [example("A", "B", 1, speedup=1.5, code=query)]
    examples += [example("A", "B", n, speedup=1.0 + n) for n in range(2, 6)]
    examples += [example("A", "C", 9, speedup=2.0)]
    store.ingest(IngestBatch(new_techniques=[technique(n) for n in "ABC"], examples=examples))
    before = store.successors("A", unit_vector(query), 3)
    # As a graph written by an earlier version holds them: no `code_vector` on some examples.
    with clean_graph.session(database=neo4j_target.database) as session:
        stripped = session.run(
            "MATCH (e:Example) WHERE e.id IN $ids REMOVE e.code_vector RETURN count(e) AS n",
            ids=[examples[0].id, examples[3].id, examples[5].id],
        ).single()
        assert stripped is not None and stripped["n"] == 3
    after = store.successors("A", unit_vector(query), 3)
    assert [[s.example.id for s in o.examples] for o in after] == [
        [s.example.id for s in o.examples] for o in before
    ]
    assert after[0].examples[0].example.code_before == query
    assert [round(s.similarity, 5) for o in after for s in o.examples] == [
        round(s.similarity, 5) for o in before for s in o.examples
    ]
