"""`regraph up` starts its executor beside the API, Neo4j and the model (issue 31: ready after a
restart in ≤ 15 s); an executor that cannot start still ends `up` with exit 1 and the reason, never
"Ready.", as when it was started before everything else."""

from __future__ import annotations

from pathlib import Path

from graphdb.connection import Neo4jTarget
from graphdb.embedded import free_port
from tests.integration.regraph_cli.test_up_preflight import _environment, _regraph


def test_an_executor_that_cannot_start_ends_up_with_its_reason(
    tmp_path: Path, neo4j_target: Neo4jTarget
) -> None:
    env = _environment(
        tmp_path,
        NEO4J_URI=neo4j_target.uri,  # the session's Neo4j: the API's own start-up succeeds
        NEO4J_PASSWORD=neo4j_target.password,
        REGRAPH_EXECUTOR_COMPILE_TIMEOUT_S="-1",  # refused by the executor's settings: it exits at once
    )
    code, output, _seconds = _regraph(
        env, "up", "--port", str(free_port()), "--executor-port", str(free_port()), timeout=120
    )
    assert code == 1, output
    assert "error: the executor exited with code 1 during start-up" in output
    assert "Ready." not in output
