"""``regraph mcp``: the reasoning graph as an MCP server over stdio, for a local coding agent.

It starts or reaches the stack as ``regraph up`` does (the embedded Neo4j unless REGRAPH_NEO4J_URI is
set, migrations, a local executor unless REGRAPH_EXECUTOR_URL is set) and serves the same tools,
resources and prompts as the API's ``/mcp``, in this process. Standard output carries the protocol
only: logs and the executor's output go to standard error.

The caller's role comes from an API key (``--api-key`` or REGRAPH_API_KEY), checked against the graph
at start-up; without one the agent reads as a reader named "local" (reviewing examples needs a
curator key).
"""

from __future__ import annotations

import logging
import subprocess
from typing import Annotated

import anyio
import typer
from rich.console import Console

from api.auth import Caller
from api.graph.service import GraphService, GraphServiceError
from api.logs import configure_logging
from api.mcp.protocol import McpSettings
from api.mcp.server import build_mcp_server, fixed_caller
from api.mcp.service import ReasoningGraphService
from api.optimize.service import OptimizeError, build_job_service
from api.settings import ApiSettings
from api.state import AppState
from graphdb.errors import GraphDBError
from graphdb.models import Role

LOCAL_CALLER = Caller(name="local", role=Role.READER)
"""The caller over stdio without an API key: the local user, reading."""

console = Console(stderr=True)
logger = logging.getLogger("regraph.mcp")


class StartupError(Exception):
    """The stack could not be started or the API key is not valid."""


def _caller(state: AppState, api_key: str | None) -> Caller:
    if not api_key:
        return LOCAL_CALLER
    assert state.graph_store is not None and state.embedder is not None  # AppState.open made them
    try:
        key = GraphService(state.graph_store, state.embedder).key_for_token(api_key)
    except GraphServiceError as e:
        raise StartupError(f"the API key is not valid: {e}") from e
    return Caller(name=key.name, role=key.role, key_id=key.id)


async def serve_stdio(settings: ApiSettings, mcp_settings: McpSettings, api_key: str | None) -> None:
    """Open the stack's state, then serve MCP on stdin/stdout until the client closes it."""
    try:
        state = await anyio.to_thread.run_sync(AppState.open, settings)
    except GraphDBError as e:
        raise StartupError(str(e)) from e
    jobs = build_job_service(settings, state.driver, state.target.database)
    try:
        await jobs.start()
        state.jobs = jobs
        caller = await anyio.to_thread.run_sync(_caller, state, api_key)
        server = build_mcp_server(lambda: ReasoningGraphService(state, mcp_settings), fixed_caller(caller))
        logger.info("mcp serving on stdio", extra={"neo4j": state.target.uri, "caller": caller.name})
        await server.run_stdio_async()
    except OptimizeError as e:
        raise StartupError(str(e)) from e
    finally:
        await jobs.stop()
        await anyio.to_thread.run_sync(state.close)


def mcp_command(
    api_key: Annotated[
        str | None,
        typer.Option(envvar="REGRAPH_API_KEY", help="an API key: its role is the agent's role"),
    ] = None,
    executor_port: Annotated[int, typer.Option(help="port for the local executor")] = 8081,
    with_executor: Annotated[
        bool, typer.Option(help="start a local executor unless REGRAPH_EXECUTOR_URL")
    ] = True,
) -> None:
    """Serve the reasoning graph to a local coding agent over MCP (stdio), starting the stack if needed."""
    from regraph_cli.main import _start_local_executor, _stop_local_executor

    settings = ApiSettings()
    configure_logging(settings.log_level, "text")  # on stderr: stdout is the protocol's
    executor: subprocess.Popen[bytes] | None = None
    if settings.executor_url is None and with_executor:
        executor, url = _start_local_executor(executor_port, quiet_stdout=True)
        settings = settings.model_copy(update={"executor_url": url})
    try:
        anyio.run(serve_stdio, settings, McpSettings(), api_key)
    except StartupError as e:
        console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(code=1) from e
    finally:
        if executor is not None:
            _stop_local_executor(executor)
