"""Fixtures for the graph store tests: every store implementation over a clean graph, and real embeddings."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.store import GraphStore, Neo4jGraphStore
from search.embeddings import Embedder, shared_embedder

STORE_IMPLEMENTATIONS = ["neo4j"]


@pytest.fixture(params=STORE_IMPLEMENTATIONS)
def store(request: pytest.FixtureRequest, clean_graph: Driver, neo4j_target: Neo4jTarget) -> GraphStore:
    """An empty graph behind each `GraphStore` implementation."""
    if request.param == "neo4j":
        return Neo4jGraphStore(clean_graph, neo4j_target.database)
    raise AssertionError(f"unknown store implementation {request.param}")


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real all-MiniLM-L6-v2 embedder (loaded once)."""
    return shared_embedder()


def unit_vector(seed: str) -> list[float]:
    """A deterministic random unit vector (for tests of the store alone, where meaning does not matter)."""
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16))
    v = rng.normal(size=384)
    return [float(x) for x in v / np.linalg.norm(v)]
