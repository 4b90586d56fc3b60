"""What every feature's MCP tools share (api/<feature>/mcp.py): who calls, the service, how a call and a
resource read are run, and the MCP face's one error mapping (`tool_error`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from api.auth import Caller
from api.errors import ServiceError
from api.mcp.evaluations import EvaluationJobs
from api.mcp.service import ProgressReporter, ReasoningGraphService

CallerOf = Callable[[ServerRequestContext[Any, Any]], Caller]
"""Who is calling, from the request's context (the transport decides)."""

Ready = Callable[[], Awaitable[None]]
"""Waits until the server's state is open (stdio opens it after answering the client's handshake);
raises a `ServiceError` when it could not be opened."""

ServiceOf = Callable[[], ReasoningGraphService]
"""The service over the running stack (raises an `unavailable` `ServiceError` while it starts or stops)."""

Operation = Callable[[ReasoningGraphService], Awaitable[dict[str, Any]]]
"""What a tool or a resource does with the service."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
"""The annotations of a tool that only reads."""


async def always_ready() -> None:
    """The `Ready` of a server whose state is open from the start (over HTTP)."""
    return None


def tool_error(error: ServiceError) -> ToolError:
    """The MCP face's one mapping: a service error as the tool error the agent reads (its message; the
    kind is in its words: not found, refused, unavailable, too many at once)."""
    return ToolError(error.message)


def answer(data: dict[str, Any]) -> CallToolResult:
    """A tool's result as one compact JSON text block; the same data is not repeated as structured
    content, which would double what an agent's context receives."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)])


def progress_of(ctx: Context) -> ProgressReporter:
    """Where a long call reports progress: the call's MCP progress notifications (if the client asked)."""

    async def report(progress: float, total: float | None, message: str) -> None:
        await ctx.report_progress(progress, total, message)

    return ProgressReporter(report)


@dataclass(frozen=True)
class McpTools:
    """The server's shared parts, handed to each feature's `register`."""

    service_of: ServiceOf
    caller_of: CallerOf
    evaluations: EvaluationJobs
    ready: Ready = always_ready

    def caller(self, ctx: Context) -> Caller:
        """Who is calling (every call needs a known caller; the HTTP gate has checked the key already)."""
        return self.caller_of(ctx.request_context)

    def service(self, ctx: Context) -> ReasoningGraphService:
        """The service, for a known caller."""
        self.caller(ctx)
        try:
            return self.service_of()
        except ServiceError as e:
            raise tool_error(e) from e

    async def call(self, ctx: Context, operation: Operation) -> CallToolResult:
        """Run a tool's `operation` once the server is ready; its answer as one JSON text block."""
        try:
            await self.ready()
            return answer(await operation(self.service(ctx)))
        except ServiceError as e:
            raise tool_error(e) from e

    async def read(self, ctx: Context | None, operation: Operation) -> dict[str, Any]:
        """Run a resource's `operation` once the server is ready. Static resources get no context (the
        SDK passes none): the transport authenticated the caller."""
        try:
            await self.ready()
            return await operation(self.service(ctx) if ctx is not None else self.service_of())
        except (ServiceError, ToolError) as e:
            raise ResourceError(str(e)) from e
