"""`regraph graph ...` and `regraph keys create-admin` with typer's runner against the session's real Neo4j."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from neo4j import Driver
from typer.testing import CliRunner

from graphdb.connection import Neo4jTarget
from graphdb.errors import ApiKeyNotFoundError
from graphdb.export import read_export
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from regraph_cli.graph import graph_app, keys_app

TRAJECTORIES = Path(__file__).resolve().parents[3] / "bench" / "trajectories"

# Registered as the integrator registers them in regraph_cli/main.py.
cli = typer.Typer()
cli.add_typer(graph_app, name="graph")
cli.add_typer(keys_app, name="keys")


def test_build_is_resumable_and_malformed_input_writes_nothing(
    runner: CliRunner, clean_graph: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    store = Neo4jGraphStore(clean_graph, neo4j_target.database)
    files = [str(TRAJECTORIES / "conv2d_3x3_f32.jsonl"), str(TRAJECTORIES / "jacobi2d_5pt_f32.jsonl")]
    first = runner.invoke(cli, ["graph", "build", *files])
    assert first.exit_code == 0, first.output
    counts = store.counts()
    # conv2d: 3 steps, jacobi: 2 steps; "Shared-memory tiling" is one technique, whatever its spelling.
    assert counts["examples"] == 5
    assert "examples added" in first.output and "graph: examples" in first.output
    again = runner.invoke(cli, ["graph", "build", *files])
    assert again.exit_code == 0 and store.counts() == counts
    assert "already ingested" in again.output

    good = json.loads((TRAJECTORIES / "gemm_f32.jsonl").read_text().splitlines()[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "steps": []}) + "\n")
    refused = runner.invoke(cli, ["graph", "build", str(bad)])
    assert refused.exit_code == 1 and "nothing was written" in refused.output
    assert store.counts() == counts

    stats = runner.invoke(cli, ["graph", "stats"])
    assert stats.exit_code == 0
    assert "examples pending review" in stats.output and str(counts["examples"]) in stats.output


def test_export_import_and_admin_bootstrap(
    runner: CliRunner, clean_graph: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    store = Neo4jGraphStore(clean_graph, neo4j_target.database)
    assert runner.invoke(cli, ["graph", "build", str(TRAJECTORIES / "jacobi2d_5pt_f32.jsonl")]).exit_code == 0
    created = runner.invoke(cli, ["keys", "create-admin", "ops"])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[-1]
    key = store.lookup_api_key(token)
    assert (key.name, key.role) == ("ops", Role.ADMIN)
    assert runner.invoke(cli, ["keys", "create-admin", "ops"]).exit_code == 1

    first, second = sorted(store.technique_names())[:2]
    store.keep_separate(first, second, actor="ops")
    out = tmp_path / "graph.json"
    exported = runner.invoke(cli, ["graph", "export", str(out)])
    assert exported.exit_code == 0, exported.output
    before = read_export(out)
    assert len(before.examples) == 2 and before.api_keys == []  # keys are not the graph's (issue 27)
    into_full = runner.invoke(cli, ["graph", "import", str(out)])
    assert into_full.exit_code == 1 and "without knowledge" in into_full.output
    clean_graph.execute_query("MATCH (n) WHERE NOT n:SchemaMigration DETACH DELETE n")
    imported = runner.invoke(cli, ["graph", "import", str(out)])
    assert imported.exit_code == 0, imported.output
    after = store.export_graph()
    assert after.model_dump(exclude={"exported_at", "audit"}) == before.model_dump(
        exclude={"exported_at", "audit"}
    )
    assert [a for a in after.audit if a.action != "graph.import"] == before.audit
    assert [(k.first, k.second) for k in store.list_kept_separate()] == [(first, second)]
    # The graph came back; the deleted key did not (an import creates none: make a new admin key).
    with pytest.raises(ApiKeyNotFoundError):
        store.lookup_api_key(token)
