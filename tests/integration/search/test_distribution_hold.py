"""The distribution rule through the real graph (issue 33): once a transition has enough verified
examples, an improvement offered by an optimize job whose step is more than k x their 95th percentile
enters held, though under the fixed limit; the 95th percentile is Neo4j's own `percentileCont`.
Real embedded Neo4j, real embeddings."""

from __future__ import annotations

import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import IngestBatch, ReviewStatus, Technique, utc_now
from graphdb.store import Neo4jGraphStore
from search.embeddings import shared_embedder
from search.engine import SearchResult
from search.protocols import INITIAL_TECHNIQUE
from search.relabel.construction import GraphImprovements, HoldSettings, percentile_95
from tests.integration.search.test_held_improvements import offered_result

pytestmark = pytest.mark.neo4j

TASK = "distribution_hold_task"
PATH = [INITIAL_TECHNIQUE, "Distribution test port", "Distribution test trick"]
STEPS = [1.5, 2.0, 2.5, 3.0, 3.5]  # the trick's speedups over the port: 95th percentile 3.4


def _result(speedups: list[float], tag: str) -> SearchResult:
    return offered_result(speedups, tag, PATH, TASK)


def test_a_step_far_above_its_transitions_distribution_is_held(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    store = Neo4jGraphStore(clean_graph, neo4j_target.database)
    embedder = shared_embedder()
    vectors = embedder.embed(PATH)
    store.ingest(
        IngestBatch(
            new_techniques=[
                Technique(name=n, embedding=v, created_at=utc_now(), created_by="test")
                for n, v in zip(PATH, vectors, strict=True)
            ],
            examples=[],
            actor="test",
        )
    )
    offer = GraphImprovements(store, embedder.embed_code, "dist", HoldSettings()).offer
    # Four paths: the trick's transition has 4 verified examples, too few for the rule (default 5).
    early = [offer(_result([2.0, 2.0 * s], f"seen{i}"), "// serial\n") for i, s in enumerate(STEPS[:4])]
    too_early = offer(_result([2.0, 2.0 * 19.0], "early"), "// serial\n")
    assert not store.get_example(too_early[1]).held  # 19x: under the fixed 20x, no distribution yet
    store.delete_example(too_early[1], actor="test")
    offer(_result([2.0, 2.0 * STEPS[4]], "seen4"), "// serial\n")
    seen = store.verified_speedups(PATH[1], PATH[2])
    assert sorted(seen) == pytest.approx(STEPS)
    with clean_graph.session(database=neo4j_target.database) as session:
        neo4j_p95 = session.run("UNWIND $xs AS x RETURN percentileCont(x, 0.95)", xs=seen).single(
            strict=True
        )[0]
    assert percentile_95(seen) == pytest.approx(neo4j_p95) == pytest.approx(3.4)
    # 19x over its parent: under the fixed 20x, but above 5 x 3.4 = 17x: held, with the rule named.
    far = offer(_result([2.0, 2.0 * 19.0], "far"), "// serial\n")
    near = offer(_result([2.0, 2.0 * 16.0], "near"), "// serial\n")  # under 17x: trusted
    port, suspect, trusted = (store.get_example(i) for i in (far[0], far[1], near[1]))
    assert not port.held and not trusted.held and all(len(ids) == 2 for ids in early)
    assert suspect.held and suspect.review_status is ReviewStatus.PENDING
    assert "95th percentile (3.40x) of the 5 verified examples" in suspect.review_reason
    # The held step lends nothing to the distribution that judges the next one.
    assert sorted(store.verified_speedups(PATH[1], PATH[2])) == pytest.approx([*STEPS, 16.0])
