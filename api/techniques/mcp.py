"""Techniques as MCP tools and resources: the technique search, every technique, one with its transitions."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from api.mcp.service import ReasoningGraphService, dump
from api.mcp.tools import READ_ONLY, McpTools


async def search(s: ReasoningGraphService, query: str, k: int) -> dict[str, Any]:
    """Techniques matching free text (full-text and vector rankings fused), best first."""
    found = await s.read(s.graph.retrieval.search_techniques, query, k)
    return s.capped(dump(found))


async def all_techniques(s: ReasoningGraphService) -> dict[str, Any]:
    """Every technique's name, description and aliases (one page of up to 1000)."""
    page = await s.read(s.graph.techniques.list_techniques, 1000, 0)
    items = [{"name": t.name, "description": t.description, "aliases": t.aliases} for t in page.items]
    return s.capped({"techniques": items, "count": len(items)})


async def one_technique(s: ReasoningGraphService, name: str) -> dict[str, Any]:
    """One technique with the transitions out of it (their statistics, no examples)."""
    found = await s.read(s.graph.techniques.get_technique, name)
    # No code to rank examples for: the transitions alone (k=0 reads no example and embeds nothing).
    successors = await s.read(s.graph.retrieval.store.successors, found.name, [], 0)
    return s.capped(
        {
            **dump(found),
            "successors": [
                {"technique": t.transition.target, "stats": t.transition.stats.model_dump(mode="json")}
                for t in successors
            ],
        }
    )


def register(server: MCPServer, tools: McpTools) -> None:
    """Add the techniques' tool and resources to `server`."""

    @server.tool(annotations=READ_ONLY)
    async def search_techniques(
        query: Annotated[str, Field(min_length=1, max_length=500, description="a name or an idea")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="how many techniques")] = 5,
    ) -> CallToolResult:
        """Find techniques by name, alias or idea (full-text and vector search fused), best first."""
        return await tools.call(ctx, lambda s: search(s, query, k))

    @server.resource("regraph://techniques", name="techniques", mime_type="application/json")
    async def techniques_resource() -> dict[str, Any]:
        """Every technique: name, description, aliases."""
        return await tools.read(None, all_techniques)

    @server.resource("regraph://techniques/{name}", name="technique", mime_type="application/json")
    async def technique_resource(name: str, ctx: Context) -> dict[str, Any]:
        """One technique (name URL-encoded) with the statistics of the transitions out of it."""
        return await tools.read(ctx, lambda s: one_technique(s, name))
