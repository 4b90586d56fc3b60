"""``regraph mcp``: the reasoning graph as an MCP server over stdio, for a local coding agent.

It starts or reaches the stack as ``regraph up`` does (the embedded Neo4j unless REGRAPH_NEO4J_URI is
set, migrations, a local executor unless REGRAPH_EXECUTOR_URL is set) and serves, in this process,
the same tools, resources and prompts as the API's ``/mcp`` (`api.mcp.stdio`). While ``regraph up``
runs on the same data directory it uses that stack's Neo4j and executor instead (`api.discovery`),
leaving the running API's jobs to it. Standard output carries the protocol only: logs and the
executor's output go to standard error.
"""

from __future__ import annotations

import subprocess
from functools import partial
from typing import Annotated

import anyio
import typer
from rich.console import Console

from api.discovery import reach_running_stack
from api.logs import configure_logging
from api.mcp.protocol import McpSettings
from api.mcp.stdio import StdioStartupError, serve_stdio
from api.settings import ApiSettings

console = Console(stderr=True)


def mcp_command(
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="REGRAPH_API_KEY", help="an API key: its role is the agent's role (default: read only)"
        ),
    ] = None,
    executor_port: Annotated[int, typer.Option(help="port for the local executor")] = 8081,
    with_executor: Annotated[
        bool, typer.Option(help="start a local executor unless REGRAPH_EXECUTOR_URL")
    ] = True,
) -> None:
    """Serve the reasoning graph to a local coding agent over MCP (stdio), starting the stack if needed."""
    from regraph_cli.main import _start_local_executor, _stop_local_executor

    # The running stack's Neo4j and executor, if `regraph up` runs on the data dir (its jobs stay its own).
    reached = reach_running_stack(ApiSettings())
    if reached.running is not None:
        console.print(f"[dim]{reached.describe()}[/]")
    settings = reached.settings
    configure_logging(settings.log_level, "text")  # on stderr: stdout is the protocol's
    executor: subprocess.Popen[bytes] | None = None
    if settings.executor_url is None and with_executor:
        executor, url = _start_local_executor(executor_port, quiet_stdout=True)
        settings = settings.model_copy(update={"executor_url": url})
    try:
        anyio.run(
            partial(serve_stdio, recover_jobs=reached.running is None), settings, McpSettings(), api_key
        )
    except StdioStartupError as e:
        console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(code=1) from e
    finally:
        if executor is not None:
            _stop_local_executor(executor)
