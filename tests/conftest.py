"""Shared fixtures: one real embedded Neo4j for the whole session, migrated to the latest schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    # Imported lazily below: the GPU host that runs `pytest tests/gpu` has no neo4j driver.
    from neo4j import Driver

    from graphdb.connection import GraphServerOptions, Neo4jTarget, OpenGraph

CLEAR_GRAPH = (
    "MATCH (n) WHERE NOT n:SchemaMigration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
)


def graph_server_options(data_dir: Path) -> GraphServerOptions:
    """Options for a test server: the embedded one, unless the run points at an external Neo4j."""
    from graphdb.connection import GraphServerOptions
    from graphdb.embedded import free_port

    return GraphServerOptions(
        uri=os.environ.get("REGRAPH_TEST_NEO4J_URI"),
        user=os.environ.get("REGRAPH_TEST_NEO4J_USER", "neo4j"),
        password=os.environ.get("REGRAPH_TEST_NEO4J_PASSWORD"),
        database="neo4j",
        data_dir=data_dir,
        embedded_port=free_port(),
        embedded_heap_mb=1024,
        embedded_pagecache_mb=128,
    )


@pytest.fixture(scope="session")
def open_test_graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenGraph]:
    """The session's Neo4j server, started once and migrated to the latest schema, with its driver."""
    from graphdb.connection import open_graph

    with open_graph(graph_server_options(tmp_path_factory.mktemp("neo4j-session"))) as graph:
        yield graph


@pytest.fixture(scope="session")
def neo4j_target(open_test_graph: OpenGraph) -> Neo4jTarget:
    return open_test_graph.target


@pytest.fixture(scope="session")
def neo4j_driver(open_test_graph: OpenGraph) -> Driver:
    return open_test_graph.driver


@pytest.fixture()
def clean_graph(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> Driver:
    """The session driver over a graph emptied of everything but the schema bookkeeping."""
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(CLEAR_GRAPH).consume()
    return neo4j_driver
