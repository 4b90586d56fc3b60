"""Issue 15's Cypher findings as regression tests against the real stack, and each layer on its own.

The API runs under uvicorn on loopback over the session's embedded Neo4j (configured by
graphdb/embedded.py as in production); a tiny graph holds techniques, an API key and a job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from neo4j import Driver
from neo4j.exceptions import ClientError

from graphdb.connection import Neo4jTarget
from graphdb.cypher_guard import check_plan
from graphdb.errors import CypherRefusedError
from graphdb.jobs import JobStore
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api.graph_support import clear, serve

SECRET_SOURCE = "__global__ void secret_kernel_of_the_admin() {}"
MAX_RESPONSE_BYTES = 200_000


@pytest.fixture(scope="module")
def tokens(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> dict[Role, str]:
    """A small graph (two techniques, one transition), a job with source code, and a key per role."""
    clear(neo4j_driver, neo4j_target)
    neo4j_driver.execute_query(
        "CREATE (:Technique {name: 'a'})-[:TRANSITION {key: 'a -> b'}]->(:Technique {name: 'b'})",
        database_=neo4j_target.database,
    )
    JobStore(neo4j_driver, neo4j_target.database).create(
        "job-1", method="mcgs", task_id="t", request={"source": SECRET_SOURCE}
    )
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    return {role: store.create_api_key(f"sec-{role.value}", role, actor="bootstrap")[1] for role in Role}


@pytest.fixture(scope="module")
def api_url(
    neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory, tokens: dict[Role, str]
) -> Iterator[str]:
    yield from serve(
        neo4j_target,
        Path(tmp_path_factory.mktemp("cypher-security")),
        cypher_timeout_s=5.0,
        cypher_max_response_bytes=MAX_RESPONSE_BYTES,
    )


def cypher(url: str, token: str, query: str, parameters: object = None) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/cypher",
        headers={"X-API-Key": token},
        json={"query": query, "parameters": parameters or {}},
        timeout=120,
    )


@pytest.mark.parametrize(
    "query",
    [
        # S1: '//' inside a string hid the rest from the old guard; the server read /etc/passwd.
        "WITH '//' AS a LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row[0] LIMIT 2",
        "WITH '//' AS a LOAD CSV FROM 'http://127.0.0.1:9/v1/device' AS row RETURN row[0] LIMIT 2",
        # S2: backtick-quoted procedures passed the allow-list.
        "CALL `dbms`.`listConfig`() YIELD name RETURN name LIMIT 1",
        "CALL `dbms`.`showCurrentUser`()",
        "CALL `dbms`.`listConnections`()",
        "CALL `db`.`clearQueryCaches`()",
        # S3 and S4: internal nodes (API keys, jobs with their submitted source).
        "MATCH (k:ApiKey) RETURN k",
        "MATCH (n) WHERE n.key_hash IS NOT NULL RETURN n.key_hash",
        "MATCH (n) RETURN n",
        "MATCH (j:Job) RETURN j.request",
        "MATCH (t:Technique) RETURN COLLECT { MATCH (k:ApiKey) RETURN k.name } AS names",
        "MATCH (n:Technique|Job) RETURN n",
    ],
)
def test_reader_cannot_read_files_call_admin_procedures_or_internal_nodes(
    query: str, api_url: str, tokens: dict[Role, str]
) -> None:
    response = cypher(api_url, tokens[Role.READER], query)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "cypher_refused"
    for leaked in ("root:", "key_hash", SECRET_SOURCE, "browser.", "neo4j"):
        assert leaked not in json.dumps(response.json().get("rows", []))


def test_reads_of_the_graph_still_work(api_url: str, tokens: dict[Role, str]) -> None:
    response = cypher(
        api_url,
        tokens[Role.READER],
        "MATCH (s:Technique)-[r:TRANSITION]->(t) RETURN s.name AS s, t.name AS t",
    )
    assert response.status_code == 200, response.text
    assert response.json()["rows"] == [{"s": "a", "t": "b"}]
    counted = cypher(api_url, tokens[Role.READER], "MATCH (n) RETURN count(n) > 0 AS some")
    assert counted.json()["rows"] == [{"some": True}]


def test_deep_nesting_answers_at_once(api_url: str, tokens: dict[Role, str]) -> None:
    # S6: ~300 levels overflowed Neo4j's parser, which never answered (241 s with the driver's retry).
    started = time.monotonic()
    for query in ("RETURN " + "[" * 300 + "1" + "]" * 300 + " AS x", "RETURN " + "NOT " * 1000 + "true AS x"):
        response = cypher(api_url, tokens[Role.READER], query)
        assert response.status_code == 400 and response.json()["error"]["type"] == "cypher_refused"
    assert time.monotonic() - started < 30


def test_deep_parameters_and_values_are_4xx(api_url: str, tokens: dict[Role, str]) -> None:
    deep: object = 1
    for _ in range(900):
        deep = [deep]
    # 900 levels: a RecursionError (500) in the old guard's conversion.
    response = cypher(api_url, tokens[Role.READER], "RETURN $p AS p", {"p": deep})
    assert response.status_code in (400, 422), response.text
    built = cypher(api_url, tokens[Role.READER], "RETURN reduce(a = [], i IN range(1, 900) | [a]) AS deep")
    assert built.status_code == 400 and built.json()["error"]["type"] == "cypher_error", built.text


def test_response_size_is_bounded(api_url: str, tokens: dict[Role, str]) -> None:
    # S8: one row of 1M strings answered with 102 MB.
    big = cypher(api_url, tokens[Role.READER], "RETURN [i IN range(1, 1000000) | 'xxxxxxxxxx'] AS big")
    error = big.json()["error"]
    assert big.status_code == 413 and error["type"] == "cypher_answer_too_large", big.text
    assert "response limit" in error["message"]
    many = cypher(
        api_url,
        tokens[Role.READER],
        "UNWIND range(1, 1000) AS i RETURN i, 'y' + i + '" + "z" * 300 + "' AS s",
    )
    assert many.status_code == 200 and many.json()["truncated"] is True
    assert 0 < len(many.content) <= MAX_RESPONSE_BYTES + 10_000


# -- each layer on its own ----------------------------------------------------------------------------


def explain(driver: Driver, target: Neo4jTarget, query: str) -> None:
    """Layer 2 alone: Neo4j's EXPLAIN of `query`, judged by `check_plan` (no lexical check first)."""
    with driver.session(database=target.database) as session:
        summary = session.run("EXPLAIN " + query).consume()
    check_plan(summary.query_type, summary.plan)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("CREATE (n:Technique {name: 'x'})", "writes"),
        ("MATCH (t:Technique) SET t.name = 'y'", "writes"),
        ("LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row", "LOAD CSV"),
        ("CALL dbms.listConfig() YIELD name RETURN name", "administers"),
        ("CALL dbms.components() YIELD name RETURN name", "administers"),
        ("CALL db.info() YIELD id RETURN id", "db.info"),
        ("MATCH (k:ApiKey) RETURN k", "ApiKey"),
        ("MATCH (k:ApiKey) RETURN count(k)", "ApiKey"),
        ("MATCH (n:Technique|JobEvent) RETURN n", "JobEvent"),
        ("MATCH (n) WHERE n.request IS NOT NULL RETURN n.request", "by label"),
        ("MATCH (n) WHERE elementId(n) = '4:x:1' RETURN n", "id"),
    ],
)
def test_layer2_neo4j_verdict_refuses_on_its_own(
    query: str, reason: str, neo4j_driver: Driver, neo4j_target: Neo4jTarget, tokens: dict[Role, str]
) -> None:
    with pytest.raises(CypherRefusedError, match=reason):
        explain(neo4j_driver, neo4j_target, query)


def test_layer2_passes_reads(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget, tokens: dict[Role, str]
) -> None:
    explain(neo4j_driver, neo4j_target, "MATCH (t:Technique {name: 'a'})-[:TRANSITION]->(n) RETURN n")
    explain(neo4j_driver, neo4j_target, "MATCH (n) RETURN count(n)")


@pytest.mark.parametrize(
    "query",
    [
        "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row[0] LIMIT 1",
        "LOAD CSV FROM 'http://127.0.0.1:9/x' AS row RETURN row[0] LIMIT 1",
    ],
)
def test_layer3_the_server_itself_loads_no_files_or_urls(
    query: str, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    # With the administrator's own connection, no guard in front: the server's settings refuse.
    with pytest.raises(ClientError) as refused:
        neo4j_driver.execute_query(query, database_=neo4j_target.database)
    message = str(refused.value)
    assert "root:" not in message
    assert "allow_csv_import_from_file_urls' is false" in message or "blocked" in message.lower(), message
