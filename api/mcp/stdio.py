"""The MCP server over stdio, in the calling process: the entry point of ``regraph mcp``.

It opens the same state the API's lifespan opens (Neo4j started or reached and migrated, the graph
store, the embedding model, the job service) and serves the same tools, resources and prompts as
``/mcp``. Standard output carries the protocol only (logging goes to standard error).

The caller's role comes from an API key, checked against the graph at start-up; without one the
agent reads as a reader named "local" (reviewing examples needs a curator key).
"""

from __future__ import annotations

import logging

import anyio

from api.auth import Caller
from api.graph.service import GraphService, GraphServiceError
from api.mcp.evaluations import EvaluationJobs
from api.mcp.protocol import McpSettings
from api.mcp.server import build_mcp_server, fixed_caller
from api.mcp.service import ReasoningGraphService
from api.optimize.service import OptimizeError, build_job_service
from api.settings import ApiSettings
from api.state import AppState
from graphdb.errors import GraphDBError
from graphdb.models import Role

logger = logging.getLogger(__name__)

LOCAL_CALLER = Caller(name="local", role=Role.READER)
"""The caller over stdio without an API key: the local user, reading."""


class StdioStartupError(Exception):
    """The stack could not be opened, or the API key given is not valid."""


def _caller(state: AppState, api_key: str | None) -> Caller:
    if not api_key:
        return LOCAL_CALLER
    assert state.graph_store is not None and state.embedder is not None  # AppState.open made them
    try:
        key = GraphService(state.graph_store, state.embedder).key_for_token(api_key)
    except GraphServiceError as e:
        raise StdioStartupError(f"the API key is not valid: {e}") from e
    return Caller(name=key.name, role=key.role, key_id=key.id)


async def serve_stdio(
    settings: ApiSettings, mcp_settings: McpSettings, api_key: str | None, *, recover_jobs: bool = True
) -> None:
    """Open the stack's state, then serve MCP on stdin/stdout until the client closes it.

    `recover_jobs` marks jobs left unfinished in the graph as failed at start-up, as the API does; off
    when the graph belongs to a running API, whose jobs are not this process's to judge.
    Raises `StdioStartupError` when the stack cannot be opened or the key is not valid.
    """
    try:
        state = await anyio.to_thread.run_sync(AppState.open, settings)
    except GraphDBError as e:
        raise StdioStartupError(str(e)) from e
    jobs = build_job_service(settings, state.driver, state.target.database)
    evaluations = EvaluationJobs()
    try:
        if recover_jobs:
            await jobs.start()
        state.jobs = jobs
        caller = await anyio.to_thread.run_sync(_caller, state, api_key)
        server = build_mcp_server(
            lambda: ReasoningGraphService(state, mcp_settings), fixed_caller(caller), evaluations
        )
        logger.info("mcp serving on stdio", extra={"neo4j": state.target.uri, "caller": caller.name})
        await server.run_stdio_async()
    except OptimizeError as e:
        raise StdioStartupError(str(e)) from e
    finally:
        await evaluations.close()
        await jobs.stop()
        await anyio.to_thread.run_sync(state.close)
