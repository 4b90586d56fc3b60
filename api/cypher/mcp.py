"""Read-only Cypher as an MCP tool, and the graph's schema as a resource (what a query can ask)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field, ValidationError

from api.auth import ANONYMOUS
from api.cypher.models import CypherRequest
from api.cypher.run import run_reader_cypher
from api.errors import ServiceError, ServiceErrorKind, ServiceUnavailableError
from api.mcp.service import ReasoningGraphService, dump
from api.mcp.tools import READ_ONLY, McpTools
from graphdb.schema import GraphSchema, SchemaReadError, read_schema


async def run_query(
    s: ReasoningGraphService, key: str, query: str, parameters: dict[str, Any], row_limit: int | None
) -> dict[str, Any]:
    """A read-only Cypher query of `key` through the path of /v1/cypher: its lexical guard, Neo4j's EXPLAIN
    verdict, a read transaction with a server-side timeout, its row and byte limits, and the same
    slots (`api.limits`): a call cancelled or past its limit stops its query and frees its connection."""
    try:
        request = CypherRequest(query=query, parameters=parameters, row_limit=row_limit)
    except ValidationError as e:
        raise ServiceError(f"invalid arguments: {e}", kind=ServiceErrorKind.INVALID) from e
    settings = s.state.settings
    response = await run_reader_cypher(s.state, key, request)
    data = dump(response)
    if response.truncated:
        data["note"] = (
            f"only the first {len(response.rows)} rows (limits: {response.row_limit} rows, "
            f"{settings.cypher_max_response_bytes} bytes): the query returned more. Aggregate, filter "
            "or page (SKIP/LIMIT) to see the rest."
        )
    return s.capped(data)


async def graph_schema(s: ReasoningGraphService) -> GraphSchema:
    """The graph's compact schema."""
    timeout_s = s.state.settings.cypher_timeout_s
    try:
        return await s.bounded(
            timeout_s,
            lambda: anyio.to_thread.run_sync(
                lambda: read_schema(s.state.driver, s.state.target.database, timeout_s=timeout_s),
                abandon_on_cancel=True,
            ),
        )
    except SchemaReadError as e:
        raise ServiceUnavailableError(str(e)) from e


def register(server: MCPServer, tools: McpTools) -> None:
    """Add the Cypher tool and the schema resource to `server`."""

    @server.tool(annotations=READ_ONLY)
    async def cypher(
        query: Annotated[str, Field(min_length=1, max_length=10_000, description="a read-only Cypher query")],
        ctx: Context,
        parameters: Annotated[dict[str, Any] | None, Field(description="values for $parameters")] = None,
        row_limit: Annotated[int | None, Field(ge=1, description="at most the server's row limit")] = None,
    ) -> CallToolResult:
        """Run a read-only Cypher query (schema: resource regraph://schema). Writes, administration and
        unlisted procedures are refused; the query runs in a read transaction with a timeout and a row cap."""
        key = tools.caller(ctx).key_id or ANONYMOUS  # the same slots as /v1/cypher and /ui
        return await tools.call(ctx, lambda s: run_query(s, key, query, parameters or {}, row_limit))

    @server.resource("regraph://schema", name="graph-schema", mime_type="application/json")
    async def schema_resource() -> dict[str, Any]:
        """The graph's labels and properties, relationship types, the patterns they form, and indexes."""

        async def read(s: ReasoningGraphService) -> dict[str, Any]:
            return dump(await graph_schema(s))

        return await tools.read(None, read)
