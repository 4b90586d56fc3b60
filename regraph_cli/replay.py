"""`regraph replay from-trajectories`: turn teacher trajectories into a replay file for the API.

The API's replay backend (`REGRAPH_MODELS__GENERATOR__BACKEND=replay`, `..._REPLAY_PATH`) reads
``regraph.replay/v1`` records; `regraph optimize --replay` also takes trajectories directly, the API
does not. This command writes the records the CLI would build from them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from search.backends.base import ModelError
from search.backends.replay import REPLAY_FORMAT, records_from_trajectories, write_replay

replay_app = typer.Typer(no_args_is_help=True, help="Replay files: a recorded model for runs without an LLM.")
console = Console(stderr=True)


@replay_app.command("from-trajectories")
def from_trajectories(
    trajectories: Annotated[Path, typer.Argument(help="teacher trajectories (regraph.trajectory/v1 JSONL)")],
    out: Annotated[Path, typer.Argument(help="the replay file to write (regraph.replay/v1)")],
    one_shot_from_final: Annotated[
        bool, typer.Option(help="also answer one-shot prompts (standard, cot, rag) with each final step")
    ] = False,
) -> None:
    """Write a replay file answering the step prompts of these trajectories' tasks."""
    try:
        lines = trajectories.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        console.print(f"[bold red]error:[/] cannot read {escape(str(trajectories))}: {escape(str(e))}")
        raise typer.Exit(code=1) from e
    if _is_replay_file(lines):
        console.print(f"[bold red]error:[/] {escape(str(trajectories))} is already a replay file")
        raise typer.Exit(code=1)
    try:
        records = records_from_trajectories(lines, one_shot_from_final=one_shot_from_final)
    except ModelError as e:
        console.print(
            f"[bold red]error:[/] {escape(str(trajectories))}: {escape(str(e))} (nothing was written)"
        )
        raise typer.Exit(code=1) from e
    if not records:
        console.print(f"[bold red]error:[/] {escape(str(trajectories))} holds no trajectory step")
        raise typer.Exit(code=1)
    count = write_replay(records, out)
    console.print(
        f"wrote {count} replay records to {escape(str(out))}; point the API at it with "
        f"REGRAPH_MODELS__GENERATOR__BACKEND=replay REGRAPH_MODELS__GENERATOR__REPLAY_PATH={escape(str(out))}"
    )


def _is_replay_file(lines: list[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    try:
        head = json.loads(first) if first else None
    except json.JSONDecodeError:
        return False
    return isinstance(head, dict) and head.get("format") == REPLAY_FORMAT
