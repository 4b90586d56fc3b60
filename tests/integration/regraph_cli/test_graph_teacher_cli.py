"""`regraph graph build --teacher-*`: a teacher model (the OpenAI-compatible test server, a real HTTP
server on loopback standing in for the model) writes the trajectories, into the session's real Neo4j."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from neo4j import Driver
from typer.testing import CliRunner

from graphdb.connection import Neo4jTarget
from graphdb.models import INITIAL_TECHNIQUE
from graphdb.store import Neo4jGraphStore
from regraph_cli.graph import graph_app
from tests.support.openai_test_server import OpenAITestServer

cli = typer.Typer()
cli.add_typer(graph_app, name="graph")
cli.command("noop")(lambda: None)  # a second command keeps "graph" a subcommand


@pytest.fixture()
def teacher() -> Iterator[OpenAITestServer]:
    with OpenAITestServer(model="teacher-7b") as server:
        yield server


def test_build_from_a_teacher_records_its_trajectories_and_reports_skipped_tasks(
    runner: CliRunner,
    teacher: OpenAITestServer,
    clean_graph: Driver,
    neo4j_target: Neo4jTarget,
    tmp_path: Path,
) -> None:
    code = '#include <cuda_runtime.h>\nextern "C" void gemm_f32(int M, int N, int K, const float* A, const float* B, float* C) {}\n'
    teacher.script(
        json.dumps({"steps": [{"method": "Parallelization", "think": "t", "detail": "d", "code": code}]}),
        "no JSON here",
    )
    out = tmp_path / "teacher.jsonl"
    args = ["graph", "build", "--teacher-tasks", "gemm_f32,transpose_f32", "--teacher-url", teacher.base_url]
    result = runner.invoke(cli, [*args, "--teacher-model", "teacher-7b", "--teacher-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 of 2 tasks answered" in result.output
    assert "skipped transpose_f32: the answer is not JSON" in result.output
    store = Neo4jGraphStore(clean_graph, neo4j_target.database)
    assert store.get_transition(INITIAL_TECHNIQUE, "Parallelization").stats.n_examples == 1
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == ["gemm_f32"]
    # The recorded file rebuilds the graph with no model: nothing new.
    again = runner.invoke(cli, ["graph", "build", str(out)])
    assert again.exit_code == 0 and "already ingested" in again.output
    assert store.counts()["examples"] == 1

    refused = runner.invoke(
        cli, ["graph", "build", "--teacher-tasks", "gemm_f32", "--teacher-url", teacher.base_url]
    )
    assert refused.exit_code == 1 and "go together" in refused.output
    nothing = runner.invoke(cli, ["graph", "build"])
    assert nothing.exit_code == 1 and "give trajectory files" in nothing.output
