"""Bad trajectory files give the CLI a clear one-line error, printed as written (issue 15, "also found").

`regraph graph build` parses every file before it opens the graph, so these run without Neo4j.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from regraph_cli.graph import graph_app

TRAJECTORIES = Path(__file__).resolve().parents[3] / "bench" / "trajectories"

cli = typer.Typer()
cli.add_typer(graph_app, name="graph")


def build(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["graph", "build", str(path)], terminal_width=400)
    return result.exit_code, result.output


def test_a_binary_trajectory_file_is_a_clear_error(tmp_path: Path) -> None:
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\xfd")
    code, output = build(garbled)
    assert code == 1
    assert "not UTF-8 text" in output and "nothing was written" in output
    assert "Traceback" not in output


def test_a_pattern_in_an_error_prints_as_written(tmp_path: Path) -> None:
    # Rich read '[a-z0-9_]' in "should match pattern '^[a-z0-9_]+$'" as markup and printed '^+$'.
    good = json.loads((TRAJECTORIES / "gemm_f32.jsonl").read_text().splitlines()[0])
    bad = tmp_path / "bad_task_id.jsonl"
    bad.write_text(json.dumps({**good, "task_id": "Not A Task [bold]"}) + "\n")
    code, output = build(bad)
    assert code == 1
    assert "'^[a-z0-9_]+$'" in output, output
    assert "[bold]" in output
