"""The CLI's side of `api.discovery`: commands reach the stack already running on their data directory.

A command that would start the embedded Neo4j (``regraph graph ...``, ``regraph keys ...``, ``regraph
db ...``, ``regraph mcp``, ``regraph optimize --graph neo4j``, ``regraph bench ... --knowledge graph``)
calls `reach` on its settings: while ``regraph up`` (``./dev up``) runs on
the same data directory, the command works through that stack's Neo4j and executor, saying so on
standard error, instead of failing on a port or a store lock held by the running server. ``regraph
up`` calls `refuse_second_stack` before starting anything.
"""

from __future__ import annotations

import typer
from rich.console import Console

from api.discovery import find_running, reach_running_stack
from api.settings import ApiSettings

console = Console(stderr=True)


def reach(settings: ApiSettings) -> ApiSettings:
    """`settings`, pointed at the running stack of their data directory when there is one."""
    reached = reach_running_stack(settings)
    if reached.running is not None:
        console.print(f"[dim]{reached.describe()}[/]")
    return reached.settings


def refuse_second_stack(settings: ApiSettings) -> None:
    """Exit with a clear message when a stack already runs on `settings`' data directory."""
    running = find_running(settings.data_dir)
    if running is None:
        return
    console.print(
        f"[bold red]error:[/] ReGraph is already running on {settings.data_dir}: the API at "
        f"{running.api_url} (pid {running.pid}), Neo4j at {running.neo4j_uri}. Use it (the CLI's graph, "
        "keys, db and mcp commands reach it by themselves), stop it first, or give this one another "
        "REGRAPH_DATA_DIR."
    )
    raise typer.Exit(code=1)
