"""A write that `BoundedGraphStore`'s caller gave up on is rolled back when it reaches its commit.

The write waits for a lock that a transaction of the test holds; its caller gives up first (the backstop
is made negative so that it does so before the server's own limit, as it does when the server is
silent); then the lock is released, the write's work ends, and it must not commit.
"""

from __future__ import annotations

import threading
import time

import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.errors import StoreTimeoutError
from graphdb.models import Role
from graphdb.store import BoundedGraphStore, Neo4jGraphStore


def test_a_given_up_write_rolls_back_instead_of_committing(
    clean_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    database = neo4j_target.database
    plain = Neo4jGraphStore(clean_graph, database)
    victim, _ = plain.create_api_key("victim", Role.READER, actor="test")
    # Given up 1 s after the call, long before the server's 30 s limit would stop the write.
    bounded = BoundedGraphStore(clean_graph, database, timeout_s=30.0, write_timeout_s=30.0, backstop_s=-29.0)
    with clean_graph.session(database=database) as session:
        locker = session.begin_transaction(timeout=60)
        locker.run("MATCH (k:ApiKey {id: $id}) SET k.name = k.name", id=victim.id).consume()
        with pytest.raises(StoreTimeoutError, match="whether the change was applied is unknown"):
            bounded.revoke_api_key(victim.id, actor="test")
        locker.rollback()  # the given-up write gets the lock, does its work, and must roll back
    deadline = time.monotonic() + 30
    while any(t.name == "graph-write" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the given-up write never ended"
        time.sleep(0.1)
    assert plain.list_api_keys()[0].revoked_at is None
    # The same store writes as usual when its caller waits.
    assert (
        BoundedGraphStore(clean_graph, database, timeout_s=30.0)
        .revoke_api_key(victim.id, actor="test")
        .revoked_at
        is not None
    )
