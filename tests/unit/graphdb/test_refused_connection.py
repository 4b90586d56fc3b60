"""A graph server that refuses the connection (nothing listens at its address) is answered at once.

The driver's own retries would try again for `RETRY_TIME_S` (10 s) before the store, readiness or a
route says so; `graphdb.retry` retries what may pass on a second try and not a refused connection.
Driven here by a real driver at a loopback port where nothing listens.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from neo4j import Driver
from neo4j.exceptions import ClientError, ServiceUnavailable

from graphdb.connection import Neo4jTarget, open_driver, readiness
from graphdb.embedded import free_port
from graphdb.errors import Neo4jUnavailableError, StoreUnavailableError
from graphdb.models import Role
from graphdb.retry import retried
from graphdb.store import BoundedGraphStore, Neo4jGraphStore

# A refused connection takes milliseconds; the driver's retries took 10 s. Room for a loaded machine.
AT_ONCE_S = 2.0


@pytest.fixture()
def refusing() -> Iterator[Driver]:
    driver = open_driver(Neo4jTarget(f"bolt://127.0.0.1:{free_port()}", "neo4j", "password-not-used"))
    try:
        yield driver
    finally:
        driver.close()


def test_store_reads_and_writes_on_a_refused_connection_fail_at_once(refusing: Driver) -> None:
    for store in (
        Neo4jGraphStore(refusing, "neo4j"),
        BoundedGraphStore(refusing, "neo4j", timeout_s=5.0, write_timeout_s=4.0),
    ):
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="refused the connection"):
            store.list_techniques()
        with pytest.raises(StoreUnavailableError, match="refused the connection"):
            store.create_api_key("never", Role.READER, actor="test")
        assert time.monotonic() - started < AT_ONCE_S


def test_readiness_on_a_refused_connection_fails_at_once(refusing: Driver) -> None:
    started = time.monotonic()
    with pytest.raises(Neo4jUnavailableError, match="refused the connection"):
        readiness(refusing, "neo4j")
    assert time.monotonic() - started < AT_ONCE_S


def test_what_may_pass_on_a_second_try_is_still_retried() -> None:
    tries: list[float] = []

    def once_unanswered() -> str:
        tries.append(time.monotonic())
        if len(tries) == 1:
            raise ServiceUnavailable("no answer within the connection timeout") from TimeoutError()  # type: ignore[no-untyped-call]
        return "answered"

    assert retried(once_unanswered) == "answered"
    assert len(tries) == 2 and tries[1] - tries[0] >= 0.7  # the driver's first delay, 1 s ± 20 %

    def refused() -> str:
        tries.append(time.monotonic())
        raise ServiceUnavailable("could not connect") from ConnectionRefusedError(111, "refused")  # type: ignore[no-untyped-call]

    def wrong() -> str:
        tries.append(time.monotonic())
        raise ClientError("a mistake in the query is not retried")

    for attempt in (refused, wrong):
        tries.clear()
        with pytest.raises((ServiceUnavailable, ClientError)):
            retried(attempt)
        assert len(tries) == 1
