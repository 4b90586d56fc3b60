"""`BoundedGraphStore`: every protocol method bounded, nothing private overridden, and a silent server
answered within the limit plus the backstop (a real driver against a loopback socket that never answers).

Its behaviour against a real Neo4j is the store conformance suite's (it is one of its implementations)
and `tests/integration/graphdb/test_bounded_store.py`'s (a given-up write is rolled back).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

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


@pytest.fixture()
def silent_bolt() -> Iterator[str]:
    """A loopback Bolt address whose server accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"bolt://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join()
        for connection in accepted:
            connection.close()  # the driver's stuck calls end now
        listener.close()


def test_a_silent_server_is_given_up_after_the_limit_and_the_backstop(silent_bolt: str) -> None:
    driver = GraphDatabase.driver(silent_bolt, auth=("neo4j", "x"), connection_timeout=5.0)
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
        driver.close()
