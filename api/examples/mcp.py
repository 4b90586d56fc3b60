"""Examples as MCP tools and a resource: the examples of a transition (filtered), one example, and review."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from api.auth import Caller
from api.errors import ServiceError, ServiceErrorKind
from api.examples.models import ExamplePublic, ReviewRequest
from api.mcp.service import ReasoningGraphService, dump, require
from api.mcp.tools import READ_ONLY, McpTools
from graphdb.models import ReviewStatus, Role, StepVerdict

EXAMPLE_SCAN_LIMIT = 2_000
"""Most examples of one transition looked at when filtering by device or verdict."""
_EXAMPLE_PAGE = 200


async def examples_of(
    s: ReasoningGraphService,
    *,
    source: str | None,
    target: str | None,
    device: str | None,
    verdict: StepVerdict | None,
    review_status: ReviewStatus | None,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    """Examples of the transition source -> target (or of one review status), filtered, as a page."""
    filtered = device is not None or verdict is not None
    if not filtered:
        page = await s.read(
            s.graph.examples.list_examples,
            source=source,
            target=target,
            status=review_status,
            limit=limit,
            offset=offset,
        )
        return s.capped(dump(page))
    matching: list[ExamplePublic] = []
    scanned = 0
    while scanned < EXAMPLE_SCAN_LIMIT:
        page = await s.read(
            s.graph.examples.list_examples,
            source=source,
            target=target,
            status=review_status,
            limit=_EXAMPLE_PAGE,
            offset=scanned,
        )
        scanned += len(page.items)
        matching.extend(
            e
            for e in page.items
            if (device is None or (e.device or "").lower() == device.lower())
            and (verdict is None or e.verdict == verdict)
        )
        if len(page.items) < _EXAMPLE_PAGE:
            break
    data: dict[str, Any] = {
        "items": [dump(e) for e in matching[offset : offset + limit]],
        "limit": limit,
        "offset": offset,
        "matching": len(matching),
    }
    if scanned >= EXAMPLE_SCAN_LIMIT:
        data["note"] = f"only the first {EXAMPLE_SCAN_LIMIT} examples were filtered"
    return s.capped(data)


async def one_example(s: ReasoningGraphService, example_id: str) -> dict[str, Any]:
    """One example with its code before and after."""
    return s.capped(dump(await s.read(s.graph.examples.get_example, example_id)))


async def review(
    s: ReasoningGraphService, caller: Caller, example_id: str, decision: str, reason: str
) -> dict[str, Any]:
    """Approve or reject an example (curators and admins only; recorded in the audit log)."""
    require(caller, Role.CURATOR)
    try:
        request = ReviewRequest.model_validate({"decision": decision, "reason": reason})
    except ValidationError as e:
        raise ServiceError(f"invalid arguments: {e}", kind=ServiceErrorKind.INVALID) from e
    reviewed = await s.read(s.graph.examples.review_example, example_id, request, actor=caller.name)
    return s.capped(dump(reviewed))


def register(server: MCPServer, tools: McpTools) -> None:
    """Add the examples' tools and resource to `server`."""

    @server.tool(annotations=READ_ONLY)
    async def transition_examples(
        ctx: Context,
        source: Annotated[str | None, Field(description="the technique the code was at")] = None,
        target: Annotated[str | None, Field(description="the technique applied")] = None,
        device: Annotated[str | None, Field(description="only examples measured on this GPU")] = None,
        verdict: Annotated[
            StepVerdict | None, Field(description="only validated steps that passed/failed")
        ] = None,
        review_status: Annotated[
            ReviewStatus | None, Field(description="only examples in this status")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> CallToolResult:
        """Examples of the transition source -> target (give both), or every example in one review status
        (give only review_status); filter by device, verdict and review status."""
        return await tools.call(
            ctx,
            lambda s: examples_of(
                s,
                source=source,
                target=target,
                device=device,
                verdict=verdict,
                review_status=review_status,
                limit=limit,
                offset=offset,
            ),
        )

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
    async def review_example(
        example_id: Annotated[str, Field(min_length=1, max_length=200)],
        decision: Literal["approve", "reject"],
        ctx: Context,
        reason: Annotated[str, Field(max_length=2000)] = "",
    ) -> CallToolResult:
        """Curators only: approve an example, or reject it (rejected examples leave retrieval and the
        statistics). Recorded in the audit log under the key's name."""
        caller = tools.caller(ctx)
        return await tools.call(ctx, lambda s: review(s, caller, example_id, decision, reason))

    @server.resource("regraph://examples/{example_id}", name="example", mime_type="application/json")
    async def example_resource(example_id: str, ctx: Context) -> dict[str, Any]:
        """One example: the code before and after a technique, its speedup, verdict and review status."""
        return await tools.read(ctx, lambda s: one_example(s, example_id))
