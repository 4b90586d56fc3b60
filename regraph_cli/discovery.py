"""The CLI's side of `api.discovery`: commands reach the stack already running on their data directory.

A command that would start the embedded Neo4j (``regraph graph ...``, ``regraph keys ...``, ``regraph
db ...``, ``regraph mcp``, ``regraph optimize --graph neo4j``, ``regraph bench ... --knowledge graph``)
calls `reach` on its settings: while ``regraph up`` (``./dev up``) runs on
the same data directory, the command works through that stack's Neo4j and executor, saying so on
standard error, instead of failing on a port or a store lock held by the running server. When nothing
runs on the default data directory the command would use (``REGRAPH_DATA_DIR`` unset) but a stack of
this user runs on another one, it refuses and names that directory instead of quietly starting a
second Neo4j on an empty graph. ``regraph up`` calls `refuse_second_stack` before starting anything.
"""

from __future__ import annotations

import typer
from rich.console import Console

from api.discovery import find_running, reach_running_stack, running_elsewhere
from api.settings import ApiSettings

console = Console(stderr=True)


def reach(settings: ApiSettings) -> ApiSettings:
    """`settings`, pointed at the running stack of their data directory when there is one."""
    reached = reach_running_stack(settings)
    if reached.running is not None:
        console.print(f"[dim]{reached.describe()}[/]")
    else:
        refuse_other_data_dir(reached.settings)
    return reached.settings


def refuse_other_data_dir(settings: ApiSettings) -> None:
    """Exit with the fix when the command would start a Neo4j on the default data directory while
    this user's stack runs on another one (the data directory was not chosen: REGRAPH_DATA_DIR unset)."""
    if settings.neo4j_uri is not None or "data_dir" in settings.model_fields_set:
        return
    elsewhere = running_elsewhere(settings.data_dir)
    if not elsewhere:
        return
    stack = elsewhere[0]
    console.print(
        f"[bold red]error:[/] no ReGraph stack runs on the default data directory {settings.data_dir}, "
        f"but one runs on {stack.data_dir} (the API at {stack.api_url}, pid {stack.pid}). This command "
        "would start a second Neo4j on an empty graph. To work with the running stack:\n"
        f"  export REGRAPH_DATA_DIR={stack.data_dir}\n"
        f"(or set REGRAPH_DATA_DIR={settings.data_dir} to use the default data directory anyway)",
        soft_wrap=True,
    )
    raise typer.Exit(code=2)


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
