"""`POST /v1/cypher`: every query of docs/cypher-examples.md against a real graph, refusals and limits."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import ReviewStatus, Role
from search.protocols import INITIAL_TECHNIQUE
from tests.integration.api.graph_support import ROOT, TILING, SeededGraph, restore, seed_graph, serve

DOC = ROOT / "docs" / "cypher-examples.md"
ROW_LIMIT = 100
TIMEOUT_S = 3.0  # generous: EXPLAIN and the run each get it, on a busy 2-core machine


@dataclass(frozen=True)
class DocQuery:
    title: str
    query: str
    parameters: dict[str, Any]


def doc_queries() -> list[DocQuery]:
    """Each `## heading` of the document with its ```cypher block and optional ```json parameters."""
    out = []
    for section in re.split(r"^## ", DOC.read_text(), flags=re.MULTILINE)[1:]:
        title = section.splitlines()[0].strip()
        cypher = re.search(r"```cypher\n(.*?)```", section, re.DOTALL)
        assert cypher is not None, f"section {title!r} has no cypher block"
        params = re.search(r"```json\n(.*?)```", section, re.DOTALL)
        out.append(DocQuery(title, cypher.group(1), json.loads(params.group(1)) if params else {}))
    return out


@pytest.fixture(scope="module")
def seeded(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> SeededGraph:
    """The module's graph, built once with the real construction pipeline."""
    return seed_graph(neo4j_driver, neo4j_target)


@pytest.fixture()
def graph(seeded: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> SeededGraph:
    """The module's graph, restored exactly before this test."""
    restore(neo4j_driver, neo4j_target, seeded)
    return seeded


@pytest.fixture(scope="module")
def api_url(neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The API with small Cypher limits, so that both are easy to hit."""
    yield from serve(
        neo4j_target,
        Path(tmp_path_factory.mktemp("cypher-api")),
        cypher_row_limit=ROW_LIMIT,
        cypher_timeout_s=TIMEOUT_S,
    )


def cypher(
    url: str, g: SeededGraph, query: str, parameters: dict[str, Any] | None = None, **extra: Any
) -> httpx.Response:
    body = {"query": query, "parameters": parameters or {}, **extra}
    return httpx.post(f"{url}/v1/cypher", headers=g.headers(Role.READER), json=body, timeout=60)


# -- what each documented query must answer, computed from the graph's own export ----------------------

Check = Callable[[SeededGraph, list[dict[str, Any]]], None]


def most_common(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    top = max(g.export.transitions, key=lambda t: t.stats.n_examples)
    assert (rows[0]["source"], rows[0]["target"], rows[0]["examples"]) == (
        top.source,
        top.target,
        top.stats.n_examples,
    )
    assert (top.source, top.target) == (INITIAL_TECHNIQUE, "Parallelization")
    assert [r["examples"] for r in rows] == sorted((r["examples"] for r in rows), reverse=True)


def best_after_tiling(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    verified = sorted(
        (t for t in g.export.transitions if t.source == TILING and t.stats.n_verified > 0),
        key=lambda t: -(t.stats.mean_speedup or 0),
    )
    assert [r["technique"] for r in rows] == [t.target for t in verified]
    assert rows[0]["technique"] == "Register tiling" and rows[0]["mean_speedup"] == pytest.approx(2.6)


def task_examples(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    assert {r["id"] for r in rows} == {e.id for e in g.export.examples if e.task_id == "gemm_f32"}
    steps = [r["step"] for r in rows if r["step"] is not None]
    assert steps == list(range(6))
    assert [r["target"] for r in rows[:2]] == ["Parallelization", TILING]


def two_hops(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    out: dict[str, set[str]] = {}
    for t in g.export.transitions:
        out.setdefault(t.source, set()).add(t.target)
    expected = sorted((a, b) for a in out[INITIAL_TECHNIQUE] for b in out.get(a, set()))
    assert [(r["first"], r["second"]) for r in rows] == expected
    assert ("Parallelization", TILING) in expected


def shortest_paths(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    assert rows[0]["path"] == [INITIAL_TECHNIQUE, "Parallelization", TILING, "Register tiling"]
    assert all(r["path"][0] == INITIAL_TECHNIQUE and r["path"][-1] == "Register tiling" for r in rows)


def pending(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    assert {r["id"] for r in rows} == {
        e.id for e in g.export.examples if e.review_status is ReviewStatus.PENDING
    }


def rejected(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    failed = [e for e in g.measured if e.review_status is ReviewStatus.REJECTED]
    assert [(r["id"], r["source"], r["target"]) for r in rows] == [(e.id, e.source, e.target) for e in failed]
    assert rows[0]["reason"] == "validation failed"


def decisions(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    live = sorted(
        (d for d in g.export.decisions if d.undone_at is None), key=lambda d: (d.at, d.id), reverse=True
    )
    assert [(r["candidate"], r["outcome"], r["technique"], r["rule"], r["flags"]) for r in rows] == [
        (d.candidate, d.outcome.value, d.technique, d.decided_by, d.flags) for d in live
    ]


def aliases(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    assert rows == [{"technique": t.name, "aliases": t.aliases} for t in g.export.techniques if t.aliases]
    assert {"technique": TILING, "aliases": ["Shared-memory tiling"]} in rows


def dead_ends(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    sources = {t.source for t in g.export.transitions}
    assert [r["technique"] for r in rows] == sorted(
        t.name for t in g.export.techniques if t.name not in sources
    )
    assert "Occupancy-aware launch bounds" in [r["technique"] for r in rows]


def reliable(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    assert {(r["source"], r["target"]) for r in rows} == {
        (t.source, t.target) for t in g.export.transitions if t.stats.n_verified >= 1
    }
    assert all(r["success_rate"] == 1.0 for r in rows)


def full_text(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    # "Memory access coalescing" is an alias of the one coalescing technique (the taxonomy knows it).
    assert rows[0]["technique"] == "Memory coalescing"


def recent_curation(g: SeededGraph, rows: list[dict[str, Any]]) -> None:
    # The test approves one example with the curator key first; it is the newest entry.
    assert (rows[0]["actor"], rows[0]["action"]) == ("test-curator", "example.approved")
    assert all(r["actor"] != "construction" for r in rows)


CHECKS: dict[str, Check] = {
    "Most common transitions": most_common,
    "Highest verified speedup after shared-memory tiling": best_after_tiling,
    "Examples for a task": task_examples,
    "Techniques two hops from sequential code": two_hops,
    "Shortest paths to a technique": shortest_paths,
    "Pending examples awaiting review": pending,
    "Rejected examples and why": rejected,
    "Relabel decisions with their rule and flags": decisions,
    "Names merged into each technique": aliases,
    "Techniques with no known successor": dead_ends,
    "Most reliable transitions": reliable,
    "Full-text search over techniques": full_text,
    "Recent curation": recent_curation,
}


def test_every_documented_query_is_checked() -> None:
    assert [q.title for q in doc_queries()] == list(CHECKS)
    assert len(CHECKS) >= 12


@pytest.mark.parametrize("doc", doc_queries(), ids=lambda q: q.title)
def test_documented_query(doc: DocQuery, api_url: str, graph: SeededGraph) -> None:
    if doc.title == "Recent curation":
        some = sorted(e.id for e in graph.export.examples if e.review_status is ReviewStatus.PENDING)[0]
        review = httpx.post(
            f"{api_url}/v1/examples/{some}/review",
            headers=graph.headers(Role.CURATOR),
            json={"decision": "approve"},
        )
        assert review.status_code == 200
    response = cypher(api_url, graph, doc.query, doc.parameters)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["rows"], f"{doc.title}: no rows"
    assert not body["truncated"]
    CHECKS[doc.title](graph, body["rows"])


@pytest.mark.parametrize(
    ("query", "clause"),
    [
        ("CREATE (t:Technique {name: 'x'}) RETURN t", "CREATE"),
        ("MATCH (t:Technique {name: 'Parallelization'}) MERGE (t)-[:TRANSITION]->(t)", "MERGE"),
        ("MATCH (t:Technique) SET t.description = 'gone'", "SET"),
        ("MATCH (e:Example) DETACH DELETE e", "DELETE"),
        ("MATCH (e:Example) DELETE e", "DELETE"),
        ("CALL dbms.components() YIELD name RETURN name", "dbms.components"),
        ("CALL dbms.security.listUsers()", "dbms.security.listUsers"),
        ("LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line", "LOAD CSV"),
        ("MATCH (e:Example) CALL (e) { RETURN 1 AS x } IN TRANSACTIONS OF 10 ROWS RETURN x", "TRANSACTIONS"),
        ("CREATE INDEX stolen FOR (n:Technique) ON (n.description)", "CREATE"),
        ("DROP CONSTRAINT technique_name_unique", "DROP"),
        ("SHOW INDEXES", "SHOW"),
    ],
)
def test_writes_and_administration_are_refused(
    query: str, clause: str, api_url: str, graph: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    response = cypher(api_url, graph, query)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "cypher_refused"
    assert clause.lower() in error["message"].lower()
    records, _, _ = neo4j_driver.execute_query(
        "MATCH (t:Technique) RETURN count(t) AS n, collect(t.description) AS d",
        database_=neo4j_target.database,
    )
    assert records[0]["n"] == len(graph.export.techniques) and "gone" not in records[0]["d"]


def test_parameters_row_limit_and_errors(api_url: str, graph: SeededGraph) -> None:
    named = cypher(
        api_url, graph, "MATCH (t:Technique {name: $name}) RETURN t.aliases AS aliases", {"name": TILING}
    )
    assert named.json()["rows"] == [{"aliases": ["Shared-memory tiling"]}]
    # The parameter is a value, never Cypher: an injection attempt matches nothing.
    injected = cypher(
        api_url,
        graph,
        "MATCH (t:Technique {name: $name}) RETURN t.name AS n",
        {"name": "x'}) DETACH DELETE t //"},
    )
    assert injected.status_code == 200 and injected.json()["rows"] == []

    capped = cypher(api_url, graph, "UNWIND range(1, 1000) AS i RETURN i")
    assert capped.json()["row_limit"] == ROW_LIMIT and capped.json()["truncated"] is True
    assert [r["i"] for r in capped.json()["rows"]] == list(range(1, ROW_LIMIT + 1))
    asked = cypher(api_url, graph, "UNWIND range(1, 1000) AS i RETURN i", row_limit=3)
    assert len(asked.json()["rows"]) == 3 and asked.json()["truncated"] is True
    # A request cannot raise the server's limit.
    greedy = cypher(api_url, graph, "UNWIND range(1, 1000) AS i RETURN i", row_limit=10_000)
    assert greedy.json()["row_limit"] == ROW_LIMIT
    exact = cypher(api_url, graph, f"UNWIND range(1, {ROW_LIMIT}) AS i RETURN i")
    assert exact.json()["truncated"] is False

    syntax = cypher(api_url, graph, "MATCH (t:Technique RETURN t")
    assert syntax.status_code == 400 and syntax.json()["error"]["type"] == "cypher_error"
    empty = httpx.post(f"{api_url}/v1/cypher", headers=graph.headers(Role.READER), json={"query": ""})
    assert empty.status_code == 422


def test_slow_query_is_stopped_at_the_timeout(api_url: str, graph: SeededGraph) -> None:
    slow = "UNWIND range(1, 1000000000) AS x WITH x WHERE x % 7 = 12 RETURN count(x) AS c"
    started = time.monotonic()
    response = cypher(api_url, graph, slow)
    elapsed = time.monotonic() - started
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "cypher_timeout", response.text
    assert elapsed < 15 * TIMEOUT_S
