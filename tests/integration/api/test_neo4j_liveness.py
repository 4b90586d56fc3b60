"""A Neo4j that stops answering or dies is noticed: readiness answers 503 instead of hanging, liveness
keeps answering, and the API recovers when the server does (issue 15, liveness).

The API is served over an embedded Neo4j of its own (not the session's shared one): the test stops
its process (SIGSTOP: connections stay open, nothing answers), resumes it, then kills it (SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from graphdb.connection import GraphServer, GraphServerOptions, open_driver
from graphdb.embedded import free_port
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api.graph_support import serve

# Generous client limits: the point is that an answer comes at all, not how fast (benchmarks time).
NO_HANG_S = 60.0
# A graph route against a stopped Neo4j: bounded at 15 s by the API, far below the driver's ~2 minutes.
SILENT_ROUTE_S = 40.0
SILENT_BODY_ROUTE_S = 25.0  # one key check (15 s), not two (30 s)


@pytest.fixture()
def own_neo4j(tmp_path: Path) -> Iterator[GraphServer]:
    options = GraphServerOptions(
        uri=None,
        user="neo4j",
        password=None,
        database="neo4j",
        data_dir=tmp_path / "graph",
        embedded_port=free_port(),
        embedded_heap_mb=256,
        embedded_pagecache_mb=32,
    )
    server = GraphServer(options)
    server.start()
    try:
        yield server
    finally:
        pid = server.embedded.pid if server.embedded is not None else None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # killed by the test
                os.kill(pid, signal.SIGCONT)
        server.stop()


def wait_for(url: str, status: int, deadline_s: float = 90.0) -> httpx.Response:
    """Poll `url` until it answers `status` (each request bounded by NO_HANG_S)."""
    deadline = time.monotonic() + deadline_s
    while True:
        response = httpx.get(url, timeout=NO_HANG_S)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.5)


def test_a_stopped_or_killed_neo4j_makes_readiness_503_not_a_hang(
    own_neo4j: GraphServer, tmp_path: Path
) -> None:
    target = own_neo4j.target
    pid = own_neo4j.embedded.pid if own_neo4j.embedded is not None else None
    assert pid is not None
    for url in serve(target, tmp_path / "api", preload_retrieval=False):
        assert httpx.get(f"{url}/readyz", timeout=NO_HANG_S).status_code == 200
        with open_driver(target) as driver:
            _, token = Neo4jGraphStore(driver, target.database).create_api_key(
                "live", Role.READER, actor="test"
            )
        reader = {"X-API-Key": token}
        assert httpx.get(f"{url}/v1/techniques", headers=reader, timeout=NO_HANG_S).status_code == 200

        os.kill(pid, signal.SIGSTOP)  # the server keeps its sockets but answers nothing
        stalled = httpx.get(f"{url}/readyz", timeout=NO_HANG_S)
        assert stalled.status_code == 503, stalled.text
        assert "did not answer" in stalled.json()["error"]["message"]
        assert httpx.get(f"{url}/healthz", timeout=NO_HANG_S).status_code == 200
        # A route that reads the graph gives up too (REGRAPH_GRAPH_READ_TIMEOUT_S 10 s + 5 s), instead of
        # waiting minutes for the driver's socket: 503 within the client's limit, saying why.
        silent = httpx.get(f"{url}/v1/techniques", headers=reader, timeout=SILENT_ROUTE_S)
        assert silent.status_code == 503, silent.text
        assert silent.json()["error"]["type"] == "service_unavailable"
        assert "graph database is not answering" in silent.json()["error"]["message"]
        # A route with a body: the edge's key check (before the body) answers 503 itself, once, instead
        # of the route asking the silent database again (15 s more).
        cypher = httpx.post(
            f"{url}/v1/cypher", headers=reader, json={"query": "RETURN 1"}, timeout=SILENT_BODY_ROUTE_S
        )
        assert cypher.status_code == 503, cypher.text
        assert "graph database is not answering" in cypher.json()["error"]["message"]

        os.kill(pid, signal.SIGCONT)
        assert wait_for(f"{url}/readyz", 200).status_code == 200

        os.kill(pid, signal.SIGKILL)
        dead = wait_for(f"{url}/readyz", 503)
        assert dead.status_code == 503, dead.text
        assert httpx.get(f"{url}/healthz", timeout=NO_HANG_S).status_code == 200
        # A route that reads the graph answers too (503 in the envelope), instead of waiting.
        techniques = httpx.get(f"{url}/v1/techniques", headers=reader, timeout=NO_HANG_S)
        assert techniques.status_code == 503, techniques.text
        assert techniques.json()["error"]["type"] == "service_unavailable"
