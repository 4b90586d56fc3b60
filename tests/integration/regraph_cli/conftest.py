"""Shared fixtures of the CLI tests: typer's runner pointed at the session's real Neo4j."""

from __future__ import annotations

from pathlib import Path

import pytest
from neo4j import Driver
from typer.testing import CliRunner

from graphdb.connection import Neo4jTarget


@pytest.fixture()
def runner(
    clean_graph: Driver, neo4j_target: Neo4jTarget, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> CliRunner:
    monkeypatch.setenv("NEO4J_URI", neo4j_target.uri)
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_target.password)
    monkeypatch.setenv("REGRAPH_DATA_DIR", str(tmp_path / "data"))
    return CliRunner()
