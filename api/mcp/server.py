"""The MCP server: each feature's tools, resources and prompts (api/<feature>/mcp.py), assembled.

One server definition serves both transports: ``regraph mcp`` runs it over stdio for a local agent,
and the API mounts it at ``/mcp`` (Streamable HTTP, see `api.mcp.http`). The transport decides who
the caller is (`CallerOf`): over HTTP the request's API key, checked like any API request; over
stdio the key given to ``regraph mcp``. Reads need any valid key; the tools in `TOOL_ROLES` need a
higher role: a caller below it does not see them in ``tools/list``, and calling one anyway is refused
(`RoleGate`), as well as by the tool itself.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from api.auth import Caller
from api.cypher import mcp as cypher_mcp
from api.errors import ServiceError, ServiceErrorKind
from api.evaluations import mcp as evaluations_mcp
from api.examples import mcp as examples_mcp
from api.mcp.evaluations import EvaluationJobs
from api.mcp.service import require
from api.mcp.tools import CallerOf, McpTools, Ready, ServiceOf, always_ready
from api.optimize import mcp as optimize_mcp
from api.retrieve import mcp as retrieve_mcp
from api.techniques import mcp as techniques_mcp
from graphdb.models import INITIAL_TECHNIQUE, Role

SERVICE_NAME = "regraph"

INSTRUCTIONS = f"""\
ReGraph holds curated, verified CUDA optimization knowledge: techniques (nodes), observed transitions
between them with statistics (how often and how much they sped code up), and examples (code before and
after, with measured speedups), plus an executor that compiles, checks and times a kernel.
When to call which:
- list_tasks first when you will verify code: it gives the task ids that task_ref takes.
- next_techniques(code, technique) for what to try next from where the code is now (start at
  '{INITIAL_TECHNIQUE}'): ranked successors with one line of evidence each and the ids of the closest
  examples; ask include_code=true (with a max_chars budget) or read regraph://examples/<id> for code.
- search_techniques to find the name the graph uses for a technique or an idea.
- evaluate_candidate (short) or start_evaluation (long) to verify your kernel against a task.
- start_optimization to run the graph-guided search as a job (follow it with job_status).
- cypher for anything else (schema: the resource regraph://schema).
"""

TOOL_ROLES: dict[str, Role] = {"review_example": Role.CURATOR}
"""Tools that need more than a reader's key (every other tool: any valid key)."""

FEATURES = (techniques_mcp, retrieve_mcp, evaluations_mcp, examples_mcp, cypher_mcp, optimize_mcp)
"""The features whose `register` adds their tools, resources and prompts to the server."""


class RoleGate:
    """SDK middleware: ``tools/list`` shows only the tools the caller's role may call, and a call to any
    other tool is refused before its arguments are even read."""

    def __init__(self, caller_of: CallerOf, ready: Ready = always_ready) -> None:
        """Tell callers apart with `caller_of`, once `ready` (the caller may be known only then)."""
        self.caller_of = caller_of
        self.ready = ready

    def _refusal(self, caller: Caller, tool: str) -> str | None:
        needed = TOOL_ROLES.get(tool)
        if needed is None:
            return None
        try:
            require(caller, needed)
        except ServiceError as e:
            if e.kind is not ServiceErrorKind.FORBIDDEN:
                raise
            return f"{tool}: {e}"
        return None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            try:
                await self.ready()
            except ServiceError as e:
                return CallToolResult(content=[TextContent(type="text", text=str(e))], is_error=True)
            name = (ctx.params or {}).get("name")
            refusal = self._refusal(self.caller_of(ctx), name) if isinstance(name, str) else None
            if refusal is not None:
                return CallToolResult(content=[TextContent(type="text", text=refusal)], is_error=True)
            return await call_next(ctx)
        result = await call_next(ctx)
        if ctx.method == "tools/list" and isinstance(result, dict):
            caller = self.caller_of(ctx)
            tools = result.get("tools") or []
            result["tools"] = [t for t in tools if self._refusal(caller, str(t.get("name"))) is None]
        return result


def build_mcp_server(
    service_of: ServiceOf, caller_of: CallerOf, evaluations: EvaluationJobs, ready: Ready = always_ready
) -> MCPServer:
    """The MCP server over the services `service_of` returns, for callers `caller_of` tells apart; its
    evaluation jobs run in `evaluations` (the caller closes it when the server stops). Calls and reads
    wait for `ready` first: the server answers the handshake and lists its tools before that."""
    server: MCPServer = MCPServer(
        SERVICE_NAME,
        title="ReGraph reasoning graph",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        log_level="WARNING",
        middleware=[RoleGate(caller_of, ready)],
    )
    tools = McpTools(service_of, caller_of, evaluations, ready)
    for feature in FEATURES:
        feature.register(server, tools)
    return server
