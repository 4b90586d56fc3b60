"""`BoundedGraphStore`: every protocol method bounded, nothing private overridden, and a silent server
answered within the limit plus the backstop (a real driver against a loopback socket that never answers).

Its behaviour against a real Neo4j is the store conformance suite's (it is one of its implementations)
and `tests/integration/graphdb/test_bounded_store.py`'s (a given-up write is rolled back).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from neo4j import GraphDatabase

from graphdb.errors import StoreTimeoutError
from graphdb.models import Role
from graphdb.store import BoundedGraphStore, GraphStore, Neo4jGraphStore
from graphdb.store.bounded import READS, WHOLE_GRAPH, WRITES


def protocol_methods() -> set[str]:
    return {name for name in dir(GraphStore) if not name.startswith("_")}


def test_every_protocol_method_is_a_read_or_a_write_and_bounded() -> None:
    assert len(protocol_methods()) > 40  # the walk found the protocol
    assert protocol_methods() == READS | WRITES
    assert not READS & WRITES
    assert WHOLE_GRAPH <= READS | WRITES
    for name in protocol_methods():
        assert name in vars(BoundedGraphStore), f"{name} is not bounded"
        assert vars(BoundedGraphStore)[name] is not getattr(Neo4jGraphStore, name)


def test_the_bounded_store_overrides_only_public_methods() -> None:
    private = {
        name
        for name in vars(BoundedGraphStore)
        if name.startswith("_") and not name.startswith("__") and hasattr(Neo4jGraphStore, name)
    }
    assert private == set()


@dataclass
class SilentBolt:
    """A loopback Bolt server that accepts connections and never answers, until :meth:`hang_up`."""

    listener: socket.socket
    accepted: list[socket.socket] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    acceptor: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"bolt://127.0.0.1:{self.listener.getsockname()[1]}"

    def accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self.stop.is_set():
            try:
                self.accepted.append(self.listener.accept()[0])
            except OSError:
                continue

    def hang_up(self) -> None:
        """Stop listening and close every connection: the driver's stuck calls fail now (a connection
        closed: an error the driver's callers retry), and their retries find nothing listening."""
        self.stop.set()
        if self.acceptor is not None:
            self.acceptor.join()
        for connection in self.accepted:
            connection.close()
        self.listener.close()


@pytest.fixture()
def silent_bolt() -> Iterator[SilentBolt]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = SilentBolt(listener)
    server.acceptor = threading.Thread(target=server.accept, daemon=True)
    server.acceptor.start()
    try:
        yield server
    finally:
        server.hang_up()


def graph_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("graph-")}


def end_of(threads: set[threading.Thread], within_s: float = 30.0) -> None:
    """Wait until ``threads`` have ended (a test's given-up calls must not outlive it)."""
    deadline = time.monotonic() + within_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a given-up call's thread outlived its test"


def test_a_silent_server_is_given_up_after_the_limit_and_the_backstop(silent_bolt: SilentBolt) -> None:
    before = graph_threads()
    driver = GraphDatabase.driver(silent_bolt.url, auth=("neo4j", "x"), connection_timeout=5.0)
    try:
        store = BoundedGraphStore(driver, "neo4j", timeout_s=0.3, write_timeout_s=0.6, backstop_s=0.4)
        started = time.monotonic()
        with pytest.raises(StoreTimeoutError, match=r"not answering: no answer within 0\.7 s"):
            store.list_techniques()
        assert 0.6 < time.monotonic() - started < 3.0
        with pytest.raises(StoreTimeoutError) as write:
            store.create_api_key("k", Role.READER, actor="test")
        assert "no answer to a write within 1 s" in str(write.value)
        assert "whether the change was applied is unknown" in str(write.value)
    finally:
        silent_bolt.hang_up()
        try:
            end_of(graph_threads() - before)
        finally:
            driver.close()


@pytest.mark.parametrize("level", [logging.WARNING, logging.DEBUG])
def test_a_given_up_call_is_retried_quietly(
    level: int, silent_bolt: SilentBolt, caplog: pytest.LogCaptureFixture
) -> None:
    """The calls given up above fail (retryably) once the server hangs up and are retried a second
    later: what they log then may come after the test, even after the test run's output was closed
    (session 32: "--- Logging error ---" from a given-up create_api_key's retry). Their caller has
    answered and logged why: the retries' warnings are logged at DEBUG, seen only where
    ``graphdb.retry`` logs DEBUG."""
    before = graph_threads()
    caplog.set_level(level, logger="graphdb.retry")
    driver = GraphDatabase.driver(silent_bolt.url, auth=("neo4j", "x"), connection_timeout=5.0)
    try:
        store = BoundedGraphStore(driver, "neo4j", timeout_s=0.3, write_timeout_s=0.3, backstop_s=0.2)
        with pytest.raises(StoreTimeoutError):
            store.create_api_key("k", Role.READER, actor="test")
        with pytest.raises(StoreTimeoutError):
            store.list_techniques()
        given_up = graph_threads() - before
        assert {t.name for t in given_up} == {"graph-read", "graph-write"}
        silent_bolt.hang_up()  # the stuck tries fail now; the retries come a second later
        end_of(given_up)
    finally:
        driver.close()
    retried = [r for r in caplog.records if r.name == "graphdb.retry"]
    assert all(r.levelno == logging.DEBUG for r in retried), [(r.levelname, r.getMessage()) for r in retried]
    if level == logging.DEBUG:  # the two given-up calls' retries, each logged
        assert len(retried) >= 2 and all("retried in" in r.getMessage() for r in retried), retried
    else:
        assert retried == []
