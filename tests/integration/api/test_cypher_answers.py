"""What a reader's query gets back when Neo4j cannot answer it well (issue 27): a database that does not
answer is reported as unavailable (503), not as the query's timeout or failure; schema procedures do not
list internal labels; and Neo4j itself ends a `//` comment at CR (why the guard refuses such comments,
tests/unit/graphdb/test_cypher_comments_and_schema.py)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from neo4j import Driver

from api.errors import status_of
from api.graph.errors import GraphUnavailableError
from api.limits import OverTimeError
from graphdb.connection import Neo4jTarget, open_driver
from graphdb.cypher_guard import CypherLimits, run_read_only
from graphdb.errors import CypherRefusedError, CypherUnavailableError
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore

pytestmark = pytest.mark.neo4j

# REGRAPH_GRAPH_ACQUISITION_TIMEOUT_S of this test's driver (20 s by default): the silent server's
# connection is given up after it, whatever the query's own limit.
ACQUIRE_S = 3.0


@pytest.fixture()
def silent_server() -> Iterator[str]:
    """A Bolt address that accepts connections and never answers (a paused database's port)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"bolt://127.0.0.1:{listener.getsockname()[1]}"


def test_a_database_that_does_not_answer_is_unavailable_not_a_failed_query(silent_server: str) -> None:
    driver = open_driver(
        Neo4jTarget(silent_server, "neo4j", "password-not-used"), acquisition_timeout_s=ACQUIRE_S
    )
    try:
        started = time.monotonic()
        with pytest.raises(CypherUnavailableError, match="not answering"):
            run_read_only(driver, "MATCH (t:Technique) RETURN t.name", limits=CypherLimits(timeout_s=2))
        assert time.monotonic() - started < ACQUIRE_S + 10  # given up at the driver's limit, not later
    finally:
        driver.close()
    # And every face answers 503 for it (or for a call given up past its limit), never 400 "timeout".
    assert status_of(GraphUnavailableError("not answering")) == 503
    assert status_of(OverTimeError("no answer", work="cypher")) == 503


def test_neo4j_ends_a_line_comment_at_a_carriage_return(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    with neo4j_driver.session(database=neo4j_target.database) as session:
        assert session.run("//x\rRETURN 1 AS one").single(strict=True)["one"] == 1
    with pytest.raises(CypherRefusedError, match="newline"):
        run_read_only(neo4j_driver, "//x\rRETURN 1 AS one", database=neo4j_target.database)


def test_schema_procedures_do_not_show_internal_labels(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    Neo4jGraphStore(neo4j_driver, neo4j_target.database).create_api_key(
        "labels-probe", Role.READER, actor="test"
    )
    with neo4j_driver.session(database=neo4j_target.database) as session:  # the server would list it
        assert "ApiKey" in [r["label"] for r in session.run("CALL db.labels() YIELD label RETURN label")]
    for query in ("CALL db.labels() YIELD label RETURN label", "CALL db.schema.visualization()"):
        with pytest.raises(CypherRefusedError, match="regraph://schema"):
            run_read_only(neo4j_driver, query, database=neo4j_target.database)
