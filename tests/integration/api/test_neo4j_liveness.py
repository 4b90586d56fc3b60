"""A Neo4j that stops answering or dies is noticed: readiness answers 503 instead of hanging, liveness
keeps answering, and the API recovers when the server does (issue 15, liveness). Reads and writes of
the routes are bounded: a slow write is stopped by the server and rolled back, a write to a silent
server answers 503 ("whether it was applied is unknown") and is not committed afterwards.

The API is served over an embedded Neo4j of its own (not the session's shared one): the test stops
its process (SIGSTOP: connections stay open, nothing answers), resumes it, then kills it (SIGKILL).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from neo4j import Driver

from api.state import GRAPH_BACKSTOP_S
from graphdb.connection import GraphServer, GraphServerOptions, open_driver
from graphdb.embedded import free_port
from graphdb.models import Role, Technique
from graphdb.store import Neo4jGraphStore
from tests.integration.api.graph_support import serve
from tests.support.stopped import stopped_state

# Generous client limits: the point is that an answer comes at all, not how fast (benchmarks time).
NO_HANG_S = 60.0
# REGRAPH_GRAPH_READ_TIMEOUT_S of this test's API (10 s by default): a read of a silent Neo4j waits 3 + 5 s.
# (The reads that must succeed here are a few rows of a graph of a few nodes.)
READ_LIMIT_S = 3
# A graph route against a stopped Neo4j: bounded at 10 s by the API, far below the driver's ~2 minutes.
SILENT_ROUTE_S = 40.0
SILENT_BODY_ROUTE_S = 12.0  # one key check (3 + 5 s), not two (16 s)
# REGRAPH_GRAPH_WRITE_TIMEOUT_S of this test's API: a blocked write ends in seconds. Only the writes
# that wait for the test's own locks run into it (the import is not held to it).
WRITE_LIMIT_S = 2
HELD = "Technique held by a lock"
SILENT_WRITE_S = 25.0  # a write to a stopped Neo4j: bounded at 2 + 5 s by the API


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


def wait_until_blocked(driver: Driver, database: str, query_part: str) -> None:
    """Wait until a transaction running a query that contains `query_part` waits for a lock."""
    deadline = time.monotonic() + NO_HANG_S
    while time.monotonic() < deadline:
        records, _, _ = driver.execute_query(
            "SHOW TRANSACTIONS YIELD currentQuery, status "
            "WHERE currentQuery CONTAINS $part AND status STARTS WITH 'Blocked' RETURN count(*) AS n",
            part=query_part,
            database_=database,
        )
        if records[0]["n"] > 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"no transaction running {query_part!r} waited for a lock")


def revoked_at(driver: Driver, database: str, key_id: str) -> object:
    records, _, _ = driver.execute_query(
        "MATCH (k:ApiKey {id: $id}) RETURN k.revoked_at AS at", id=key_id, database_=database
    )
    return records[0]["at"]


def test_a_stopped_or_killed_neo4j_makes_readiness_503_not_a_hang(
    own_neo4j: GraphServer, tmp_path: Path
) -> None:
    target = own_neo4j.target
    pid = own_neo4j.embedded.pid if own_neo4j.embedded is not None else None
    assert pid is not None
    for url in serve(
        target,
        tmp_path / "api",
        preload_retrieval=False,
        graph_read_timeout_s=READ_LIMIT_S,
        graph_write_timeout_s=WRITE_LIMIT_S,
    ):
        assert httpx.get(f"{url}/readyz", timeout=NO_HANG_S).status_code == 200
        with open_driver(target) as driver:
            store = Neo4jGraphStore(driver, target.database)
            _, token = store.create_api_key("live", Role.READER, actor="test")
            _, admin_token = store.create_api_key("admin", Role.ADMIN, actor="test")
            victim, _ = store.create_api_key("victim", Role.READER, actor="test")
            reader = {"X-API-Key": token}
            admin = {"X-API-Key": admin_token}
            assert httpx.get(f"{url}/v1/techniques", headers=reader, timeout=NO_HANG_S).status_code == 200

            revoke_victim = functools.partial(
                httpx.post, f"{url}/v1/keys/{victim.id}/revoke", headers=admin, timeout=SILENT_WRITE_S
            )

            # A transaction of our own holds the lock that revoking the victim key needs.
            locker_session = driver.session(database=target.database)
            locker = locker_session.begin_transaction(timeout=600)
            locker.run("MATCH (k:ApiKey {id: $id}) SET k.name = k.name", id=victim.id).consume()
            # A whole-graph import (admin, one transaction) is not held to a route's write limit: a large
            # one takes minutes. It waits here for a lock longer than that limit and its backstop, then
            # lands (with the routes' limit it was stopped at that limit and answered 503).
            store.create_technique(
                Technique(name=HELD, description="held by the test", created_at=datetime.now(UTC)),
                actor="test",
            )
            export = httpx.get(f"{url}/v1/graph/export", headers=admin, timeout=NO_HANG_S).json()
            driver.execute_query(
                "MATCH (t:Technique {name: $n}) DETACH DELETE t", n=HELD, database_=target.database
            )
            holder_session = driver.session(database=target.database)
            holder = holder_session.begin_transaction(timeout=600)
            holder.run("CREATE (:Technique {name: $n})", n=HELD).consume()  # the name's index entry is locked
            importing = ThreadPoolExecutor(1, thread_name_prefix="liveness-import")
            started = time.monotonic()
            landed = importing.submit(
                httpx.post, f"{url}/v1/graph/import", headers=admin, json=export, timeout=NO_HANG_S
            )
            wait_until_blocked(driver, target.database, "UNWIND")
            # While the import waits: a slow write (it waits for the locker's lock). Neo4j stops it at
            # REGRAPH_GRAPH_WRITE_TIMEOUT_S and rolls it back; the route says so (503), well before the
            # driver's minutes.
            slow = revoke_victim()
            assert slow.status_code == 503, slow.text
            assert slow.json()["error"]["type"] == "service_unavailable"
            assert (
                f"stopped a write that ran past its {WRITE_LIMIT_S} s limit"
                in slow.json()["error"]["message"]
            )
            assert "nothing was written" in slow.json()["error"]["message"]
            assert revoked_at(driver, target.database, victim.id) is None
            assert not landed.done()  # the import still waits, past the route's limit
            time.sleep(max(0.0, WRITE_LIMIT_S + GRAPH_BACKSTOP_S + 3 - (time.monotonic() - started)))
            holder.rollback()
            holder_session.close()
            imported = landed.result()
            importing.shutdown()
            assert imported.status_code == 200, imported.text
            assert time.monotonic() - started > WRITE_LIMIT_S + GRAPH_BACKSTOP_S
            held = httpx.get(f"{url}/v1/techniques/{quote(HELD)}", headers=reader, timeout=NO_HANG_S)
            assert held.status_code == 200 and held.json()["description"] == "held by the test"
            # A write under way when Neo4j stops answering: given up after the limit + 5 s, saying that
            # whether it was applied is unknown.
            writing = ThreadPoolExecutor(1, thread_name_prefix="liveness-revoke")
            pending = writing.submit(revoke_victim)
            wait_until_blocked(driver, target.database, "revoked_at")

            os.kill(pid, signal.SIGSTOP)  # the server keeps its sockets but answers nothing
            # kill() returns before every thread has stopped: ask once the process reads as stopped (a
            # rehearsal of session 32 got readiness "ready" asked right after the kill)
            state = stopped_state(pid)
            # The calls below wait on the silent server at the same time, each within its own bound.
            asking = ThreadPoolExecutor(3, thread_name_prefix="liveness-silent")
            stalled = asking.submit(httpx.get, f"{url}/readyz", timeout=NO_HANG_S)
            # A route that reads the graph gives up too (REGRAPH_GRAPH_READ_TIMEOUT_S 3 s + 5 s), instead of
            # waiting minutes for the driver's socket: 503 within the client's limit, saying why.
            silent = asking.submit(httpx.get, f"{url}/v1/techniques", headers=reader, timeout=SILENT_ROUTE_S)
            # A route with a body: the edge's key check (before the body) answers 503 itself, once, instead
            # of the route asking the silent database again (8 s more).
            cypher = asking.submit(
                httpx.post,
                f"{url}/v1/cypher",
                headers=reader,
                json={"query": "RETURN 1"},
                timeout=SILENT_BODY_ROUTE_S,
            )
            assert httpx.get(f"{url}/healthz", timeout=NO_HANG_S).status_code == 200
            assert stalled.result().status_code == 503, f"JVM state {state!r}: {stalled.result().text}"
            assert "did not answer" in stalled.result().json()["error"]["message"]
            assert silent.result().status_code == 503, silent.result().text
            assert silent.result().json()["error"]["type"] == "service_unavailable"
            assert "graph database is not answering" in silent.result().json()["error"]["message"]
            assert cypher.result().status_code == 503, cypher.result().text
            assert "graph database is not answering" in cypher.result().json()["error"]["message"]
            asking.shutdown()
            silent_write = pending.result()
            writing.shutdown()
            assert silent_write.status_code == 503, silent_write.text
            assert silent_write.json()["error"]["type"] == "service_unavailable"
            message = silent_write.json()["error"]["message"]
            within = f"no answer to a write within {WRITE_LIMIT_S + GRAPH_BACKSTOP_S:g} s"
            assert f"graph database is not answering: {within}" in message
            assert "whether the change was applied is unknown" in message

            os.kill(pid, signal.SIGCONT)
            assert wait_for(f"{url}/readyz", 200).status_code == 200
            # Once Neo4j answers again, the given-up write ends without committing, and the lock is free.
            locker.rollback()
            locker_session.close()
            deadline = time.monotonic() + NO_HANG_S
            while any(t.name == "graph-write" for t in threading.enumerate()):
                assert time.monotonic() < deadline, "the given-up write never ended"
                time.sleep(0.2)
            assert revoked_at(driver, target.database, victim.id) is None

        os.kill(pid, signal.SIGKILL)
        # A route that reads the graph answers too (503 in the envelope), instead of waiting; asked while
        # readiness is polled.
        with ThreadPoolExecutor(1, thread_name_prefix="liveness-dead") as reading:
            techniques = reading.submit(httpx.get, f"{url}/v1/techniques", headers=reader, timeout=NO_HANG_S)
            dead = wait_for(f"{url}/readyz", 503)
            assert dead.status_code == 503, dead.text
            assert httpx.get(f"{url}/healthz", timeout=NO_HANG_S).status_code == 200
            assert techniques.result().status_code == 503, techniques.result().text
            assert techniques.result().json()["error"]["type"] == "service_unavailable"
