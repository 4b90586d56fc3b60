"""Fixtures for the integration tests: every graph store implementation over a clean graph, real
embeddings, and the run's shared cache of candidate builds."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.store import BoundedGraphStore, GraphStore, Neo4jGraphStore
from search.embeddings import Embedder, shared_embedder
from tests.support.buildcache import shared_builds_dir

STORE_IMPLEMENTATIONS = ["neo4j", "bounded"]
"""Every `GraphStore` implementation: the store conformance suite runs each of them."""


def open_store(implementation: str, driver: Driver, database: str) -> GraphStore:
    """A store of `implementation` (one of `STORE_IMPLEMENTATIONS`) over `driver`."""
    if implementation == "neo4j":
        return Neo4jGraphStore(driver, database)
    if implementation == "bounded":  # the routes' store, with limits no test here comes near
        return BoundedGraphStore(driver, database, timeout_s=30.0, write_timeout_s=30.0)
    raise AssertionError(f"unknown store implementation {implementation}")


@pytest.fixture()
def store(clean_graph: Driver, neo4j_target: Neo4jTarget) -> GraphStore:
    """An empty graph behind the Neo4j store (the conformance suite parametrizes its own over all)."""
    return open_store("neo4j", clean_graph, neo4j_target.database)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real all-MiniLM-L6-v2 embedder (loaded once)."""
    return shared_embedder()


def unit_vector(seed: str) -> list[float]:
    """A deterministic random unit vector (for tests of the store alone, where meaning does not matter)."""
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16))
    v = rng.normal(size=384)
    return [float(x) for x in v / np.linalg.norm(v)]


@pytest.fixture(scope="session")
def shared_builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's cache of candidate builds (`tests.support.buildcache`), for the executor tests that do
    not examine building: ``sharing_builds(cache_dir, shared_builds)``."""
    return shared_builds_dir(tmp_path_factory)
