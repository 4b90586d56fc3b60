"""The real stack the MCP tests talk to, shared per test module.

The session's Neo4j holds the committed seed graph (regraph_data/seed_graph, loaded the way the API loads
it into an empty graph) and one API key per role; the REAL executor service runs on loopback with
runtime ``none`` (compile-only: nothing is ever verified here, as on CI); standing in for the LLM, the
replay backend answers the step prompts from the mandelbrot teacher trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from neo4j import Driver

from api.settings import default_seed_graph
from api.state import load_seed_graph
from graphdb.connection import Neo4jTarget
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from search.backends.replay import records_from_trajectories, write_replay
from tests.conftest import CLEAR_GRAPH
from tests.support.servers import compile_only_executor

ROOT = Path(__file__).resolve().parents[3]
TASK_ID = "mandelbrot_q28_i32"
TRAJECTORY = ROOT / "bench" / "trajectories" / f"{TASK_ID}.jsonl"
# How many techniques the committed seed graph holds (the tests load it as the API does).
SEED_NAMES = [
    t["name"]
    for t in json.loads((ROOT / "regraph_data" / "seed_graph" / "seed_graph.json").read_text())["techniques"]
]
SEED_TECHNIQUES = len(SEED_NAMES)


@dataclass(frozen=True)
class SeededGraph:
    """The seed graph in the session's Neo4j, and a token per role."""

    driver: Driver
    target: Neo4jTarget
    tokens: dict[Role, str]

    def count(self, cypher: str) -> int:
        """A single number read from the graph (for before/after checks)."""
        with self.driver.session(database=self.target.database) as session:
            value: int = session.run(cypher).single(strict=True)[0]
            return value


@pytest.fixture(scope="module")
def seeded(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> SeededGraph:
    """The seed graph, freshly loaded for this module, with a reader and a curator key."""
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(CLEAR_GRAPH).consume()
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    assert load_seed_graph(store, default_seed_graph()) is not None
    tokens = {
        role: store.create_api_key(f"mcp-{role.value}", role, actor="test")[1]
        for role in (Role.READER, Role.CURATOR, Role.ADMIN)
    }
    return SeededGraph(neo4j_driver, neo4j_target, tokens)


@pytest.fixture(scope="module")
def executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real executor, compile-only (no GPU runtime) whatever machine the test runs on."""
    with compile_only_executor(tmp_path_factory.mktemp("executor-cache")) as url:
        yield url


@pytest.fixture(scope="module")
def replay_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Replayed teacher answers for the mandelbrot task (the stand-in for the LLM)."""
    path = tmp_path_factory.mktemp("replay") / "mandelbrot.replay.jsonl"
    write_replay(records_from_trajectories(TRAJECTORY.read_text().splitlines()), path)
    return path
