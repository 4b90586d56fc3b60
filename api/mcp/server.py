"""The MCP server: tools, resources and prompts over `ReasoningGraphService`, built with the MCP SDK.

One server definition serves both transports: ``regraph mcp`` runs it over stdio for a local agent,
and the API mounts it at ``/mcp`` (Streamable HTTP, see `api.mcp.http`). The transport decides who
the caller is (`CallerOf`): over HTTP the request's API key, checked like any API request; over
stdio the key given to ``regraph mcp``. Reads need any valid key; the tools in `TOOL_ROLES` need a
higher role: a caller below it does not see them in ``tools/list``, and calling one anyway is refused
(`RoleGate`), as well as by the tool itself.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from api.auth import ANONYMOUS, Caller
from api.mcp.answers import DEFAULT_ANSWER_CHARS, MAX_ANSWER_CHARS, MIN_ANSWER_CHARS
from api.mcp.evaluations import EvaluationJobs
from api.mcp.service import (
    McpForbiddenError,
    McpServiceError,
    ProgressReporter,
    ReasoningGraphService,
    dump,
    require,
)
from api.optimize.protocol import MAX_SOURCE_CHARS
from graphdb.models import INITIAL_TECHNIQUE, ReviewStatus, Role, StepVerdict
from search.baselines import Method

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

CallerOf = Callable[[ServerRequestContext[Any, Any]], Caller]
"""Who is calling, from the request's context (the transport decides)."""

TOOL_ROLES: dict[str, Role] = {"review_example": Role.CURATOR}
"""Tools that need more than a reader's key (every other tool: any valid key)."""


Ready = Callable[[], Awaitable[None]]
"""Waits until the server's state is open (stdio opens it after answering the client's handshake);
raises `McpServiceError` when it could not be opened."""


async def _always_ready() -> None:
    return None


class RoleGate:
    """SDK middleware: ``tools/list`` shows only the tools the caller's role may call, and a call to any
    other tool is refused before its arguments are even read."""

    def __init__(self, caller_of: CallerOf, ready: Ready = _always_ready) -> None:
        """Tell callers apart with `caller_of`, once `ready` (the caller may be known only then)."""
        self.caller_of = caller_of
        self.ready = ready

    def _refusal(self, caller: Caller, tool: str) -> str | None:
        needed = TOOL_ROLES.get(tool)
        if needed is None:
            return None
        try:
            require(caller, needed)
        except McpForbiddenError as e:
            return f"{tool}: {e}"
        return None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            try:
                await self.ready()
            except McpServiceError as e:
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


ServiceOf = Callable[[], ReasoningGraphService]
"""The service over the running stack (raises `McpUnavailableError` while it starts or stops)."""

CandidateSource = Annotated[
    str, Field(min_length=1, max_length=MAX_SOURCE_CHARS, description="your candidate's source")
]
TaskRef = Annotated[str | None, Field(description="a task id of the service's task library")]
InlineTask = Annotated[dict[str, Any] | None, Field(description="or the task inline (regraph.task/v1)")]

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


def _progress(ctx: Context) -> ProgressReporter:
    async def report(progress: float, total: float | None, message: str) -> None:
        await ctx.report_progress(progress, total, message)

    return ProgressReporter(report)


def build_mcp_server(
    service_of: ServiceOf, caller_of: CallerOf, evaluations: EvaluationJobs, ready: Ready = _always_ready
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

    def service(ctx: Context) -> ReasoningGraphService:
        caller_of(
            ctx.request_context
        )  # every call needs a known caller (the HTTP gate has checked the key already)
        try:
            return service_of()
        except McpServiceError as e:
            raise ToolError(str(e)) from e

    async def tool_call(
        ctx: Context, call: Callable[[ReasoningGraphService], Awaitable[dict[str, Any]]]
    ) -> CallToolResult:
        try:
            await ready()
            return answer(await call(service(ctx)))
        except McpServiceError as e:
            raise ToolError(str(e)) from e

    async def resource_read(
        ctx: Context | None, call: Callable[[ReasoningGraphService], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        # Static resources get no context (the SDK passes none): the transport authenticated the caller.
        try:
            await ready()
            return await call(service(ctx) if ctx is not None else service_of())
        except (McpServiceError, ToolError) as e:
            raise ResourceError(str(e)) from e

    # -- tools -------------------------------------------------------------------------------------------

    @server.tool(annotations=_READ)
    async def search_techniques(
        query: Annotated[str, Field(min_length=1, max_length=500, description="a name or an idea")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="how many techniques")] = 5,
    ) -> CallToolResult:
        """Find techniques by name, alias or idea (full-text and vector search fused), best first."""
        return await tool_call(ctx, lambda s: s.search_techniques(query, k))

    @server.tool(annotations=_READ)
    async def next_techniques(
        code: Annotated[str, Field(min_length=1, description="the current source code (CUDA or C++)")],
        ctx: Context,
        technique: Annotated[
            str, Field(description=f"the technique the code is at now; '{INITIAL_TECHNIQUE}' to start")
        ] = INITIAL_TECHNIQUE,
        k: Annotated[int, Field(ge=1, le=10, description="closest examples per successor technique")] = 1,
        include_code: Annotated[
            bool, Field(description="also the examples' code before/after (cut to fit max_chars)")
        ] = False,
        max_chars: Annotated[
            int,
            Field(
                ge=MIN_ANSWER_CHARS,
                le=MAX_ANSWER_CHARS,
                description="the answer's size budget, in characters",
            ),
        ] = DEFAULT_ANSWER_CHARS,
    ) -> CallToolResult:
        """The techniques to try next for this code, best supported first: successors of `technique` in the
        graph, each with one line of evidence (examples, verified, success rate, median speedup) and the ids
        of the examples whose code is closest to yours (the retrieval the graph search uses). Code only with
        include_code=true, cut to the max_chars budget; or read one example as regraph://examples/<id>."""
        return await tool_call(
            ctx,
            lambda s: s.next_techniques(code, technique, k, include_code=include_code, max_chars=max_chars),
        )

    @server.tool(annotations=_READ)
    async def list_tasks(
        ctx: Context,
        query: Annotated[
            str, Field(max_length=200, description="only tasks whose id, domain or description holds this")
        ] = "",
    ) -> CallToolResult:
        """The tasks this service can verify code against (their ids are what task_ref takes), with kind,
        domain, tier and a one-line description. Call it before evaluate_candidate or start_optimization."""

        async def listing(s: ReasoningGraphService) -> dict[str, Any]:
            return s.list_tasks(query)

        return await tool_call(ctx, listing)

    @server.tool(annotations=_READ)
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
        return await tool_call(
            ctx,
            lambda s: s.transition_examples(
                source=source,
                target=target,
                device=device,
                verdict=verdict,
                review_status=review_status,
                limit=limit,
                offset=offset,
            ),
        )

    @server.tool(annotations=_READ)
    async def cypher(
        query: Annotated[str, Field(min_length=1, max_length=10_000, description="a read-only Cypher query")],
        ctx: Context,
        parameters: Annotated[dict[str, Any] | None, Field(description="values for $parameters")] = None,
        row_limit: Annotated[int | None, Field(ge=1, description="at most the server's row limit")] = None,
    ) -> CallToolResult:
        """Run a read-only Cypher query (schema: resource regraph://schema). Writes, administration and
        unlisted procedures are refused; the query runs in a read transaction with a timeout and a row cap."""
        key = caller_of(ctx.request_context).key_id or ANONYMOUS  # the same slots as /v1/cypher and /ui
        return await tool_call(ctx, lambda s: s.cypher(key, query, parameters or {}, row_limit))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def evaluate_candidate(
        source: CandidateSource, ctx: Context, task_ref: TaskRef = None, task: InlineTask = None
    ) -> CallToolResult:
        """Verify a candidate against a task on the executor: static checks, compile, then (on a GPU) check
        against the reference on fresh inputs and time it. Returns the executor's typed verdict; without a
        GPU the verdict is compile-only and never a pass. Sends progress notifications while it runs."""

        caller = caller_of(ctx.request_context)
        key = caller.key_id or ANONYMOUS

        async def run(s: ReasoningGraphService) -> dict[str, Any]:
            judged = await s.evaluate(
                source,
                task_ref=task_ref,
                task=task,
                slot=key,
                progress=_progress(ctx),
                caller_id=caller.job_owner,
            )
            return s.capped(dump(judged))

        return await tool_call(ctx, run)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def start_evaluation(
        source: CandidateSource, ctx: Context, task_ref: TaskRef = None, task: InlineTask = None
    ) -> CallToolResult:
        """evaluate_candidate as a job, for evaluations longer than your client waits for one call: returns
        an evaluation id at once; follow it with evaluation_status(evaluation_id, wait_s=...) (progress
        notifications, then the verdict), cancel it with cancel_evaluation."""
        caller = caller_of(ctx.request_context)

        async def start(s: ReasoningGraphService) -> dict[str, Any]:
            resolved = s.resolve_task(task_ref, task)

            # The slot is taken now (refused at once past the key's share) and held until the job ends.
            ticket = s.evaluation_slot(caller.key_id or ANONYMOUS)

            async def evaluate(progress: ProgressReporter) -> dict[str, Any]:
                judged = await s.evaluate(
                    source,
                    task_ref=task_ref,
                    task=task,
                    slot=ticket,
                    progress=progress,
                    caller_id=caller.job_owner,
                )
                return s.capped(dump(judged))

            try:
                job = evaluations.start(caller.job_owner, resolved.id, evaluate)
            except BaseException:
                ticket.release()
                raise
            assert job.task is not None
            job.task.add_done_callback(lambda _task: ticket.release())
            return {
                **job.public(),
                "hint": "follow it with evaluation_status(evaluation_id, wait_s=...), cancel with "
                "cancel_evaluation",
            }

        return await tool_call(ctx, start)

    @server.tool(annotations=_READ)
    async def evaluation_status(
        evaluation_id: Annotated[str, Field(min_length=1, max_length=100)],
        ctx: Context,
        wait_s: Annotated[
            float, Field(ge=0, le=3600, description="follow it (progress notifications) up to this long")
        ] = 0.0,
    ) -> CallToolResult:
        """An evaluation's state, its progress and, once finished, the executor's verdict (as
        evaluate_candidate returns it). With wait_s > 0 the call follows it until it ends or time is up."""
        caller = caller_of(ctx.request_context)

        async def status(s: ReasoningGraphService) -> dict[str, Any]:
            job = evaluations.get(evaluation_id, caller.job_scope)
            await evaluations.follow(job, min(wait_s, s.settings.max_wait_s), _progress(ctx))
            return s.capped(job.public())

        return await tool_call(ctx, status)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
    async def cancel_evaluation(
        evaluation_id: Annotated[str, Field(min_length=1, max_length=100)], ctx: Context
    ) -> CallToolResult:
        """Cancel a running evaluation (its verdict, if the executor still sends one, is dropped)."""
        caller = caller_of(ctx.request_context)

        async def cancel(s: ReasoningGraphService) -> dict[str, Any]:
            return (await evaluations.cancel(evaluation_id, caller.job_scope)).public()

        return await tool_call(ctx, cancel)

    @server.tool()
    async def start_optimization(
        ctx: Context,
        task_ref: Annotated[str | None, Field(description="a task id of the service's task library")] = None,
        task: Annotated[dict[str, Any] | None, Field(description="or the task inline")] = None,
        source: Annotated[
            str | None, Field(max_length=MAX_SOURCE_CHARS, description="the program to start from")
        ] = None,
        method: Method = "regraph-mcgs",
        budget: Annotated[int, Field(ge=1, le=1000, description="executor evaluations")] = 20,
        rollouts: Annotated[int | None, Field(ge=1, le=1000)] = None,
        seed: Annotated[int, Field(ge=0)] = 0,
        verification: Literal["auto", "verified", "compile-only"] = "auto",
    ) -> CallToolResult:
        """Start a graph-guided optimization job (the API's job queue, as POST /v1/optimize) and return its
        id at once; follow it with job_status(job_id, wait_s=...), cancel it with cancel_job."""
        request = {
            "task_ref": task_ref,
            "task": task,
            "source": source,
            "method": method,
            "budget": budget,
            "rollouts": rollouts,
            "seed": seed,
            "verification": verification,
        }
        body = {k: v for k, v in request.items() if v is not None}
        caller = caller_of(ctx.request_context)
        return await tool_call(ctx, lambda s: s.start_optimization(caller, body))

    @server.tool(annotations=_READ)
    async def job_status(
        job_id: Annotated[str, Field(min_length=1, max_length=100)],
        ctx: Context,
        wait_s: Annotated[
            float, Field(ge=0, le=3600, description="follow the job (progress notifications) up to this long")
        ] = 0.0,
    ) -> CallToolResult:
        """An optimization job's state and, once finished, its outcome and best code. With wait_s > 0 the
        call follows the job's events as progress notifications until it ends or the time is up."""
        caller = caller_of(ctx.request_context)
        return await tool_call(
            ctx, lambda s: s.job_status(caller, job_id, wait_s=wait_s, progress=_progress(ctx))
        )

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
    async def cancel_job(
        job_id: Annotated[str, Field(min_length=1, max_length=100)], ctx: Context
    ) -> CallToolResult:
        """Cancel a queued or running optimization job."""
        caller = caller_of(ctx.request_context)
        return await tool_call(ctx, lambda s: s.cancel_job(caller, job_id))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
    async def review_example(
        example_id: Annotated[str, Field(min_length=1, max_length=200)],
        decision: Literal["approve", "reject"],
        ctx: Context,
        reason: Annotated[str, Field(max_length=2000)] = "",
    ) -> CallToolResult:
        """Curators only: approve an example, or reject it (rejected examples leave retrieval and the
        statistics). Recorded in the audit log under the key's name."""
        caller = caller_of(ctx.request_context)
        return await tool_call(ctx, lambda s: s.review_example(caller, example_id, decision, reason))

    # -- resources ---------------------------------------------------------------------------------------

    @server.resource("regraph://schema", name="graph-schema", mime_type="application/json")
    async def schema_resource() -> dict[str, Any]:
        """The graph's labels and properties, relationship types, the patterns they form, and indexes."""

        async def read(s: ReasoningGraphService) -> dict[str, Any]:
            return dump(await s.schema())

        return await resource_read(None, read)

    @server.resource("regraph://tasks", name="tasks", mime_type="application/json")
    async def tasks_resource() -> dict[str, Any]:
        """The service's tasks: the ids task_ref takes, with kind, domain, tier and description."""

        async def read(s: ReasoningGraphService) -> dict[str, Any]:
            return s.list_tasks()

        return await resource_read(None, read)

    @server.resource("regraph://techniques", name="techniques", mime_type="application/json")
    async def techniques_resource() -> dict[str, Any]:
        """Every technique: name, description, aliases."""
        return await resource_read(None, lambda s: s.list_techniques())

    @server.resource("regraph://techniques/{name}", name="technique", mime_type="application/json")
    async def technique_resource(name: str, ctx: Context) -> dict[str, Any]:
        """One technique (name URL-encoded) with the statistics of the transitions out of it."""
        return await resource_read(ctx, lambda s: s.technique(name))

    @server.resource("regraph://examples/{example_id}", name="example", mime_type="application/json")
    async def example_resource(example_id: str, ctx: Context) -> dict[str, Any]:
        """One example: the code before and after a technique, its speedup, verdict and review status."""
        return await resource_read(ctx, lambda s: s.example(example_id))

    @server.resource("regraph://jobs/{job_id}/result", name="job-result", mime_type="application/json")
    async def job_result_resource(job_id: str, ctx: Context) -> dict[str, Any]:
        """An optimization job's full result: every candidate with its path and verdict, the best code."""
        caller = caller_of(ctx.request_context)
        return await resource_read(ctx, lambda s: s.job_result(caller, job_id))

    # -- prompts -----------------------------------------------------------------------------------------

    @server.prompt(name="optimize_cuda", title="Optimize this CUDA code with the reasoning graph")
    def optimize_cuda(code: str, task_ref: str = "") -> str:
        """A plan for optimizing a kernel step by step with the graph's techniques and the executor."""
        task_line = (
            f"Verify each version with evaluate_candidate(source, task_ref={task_ref!r})."
            if task_ref
            else "If you have a task for it (task_ref or an inline regraph.task/v1), verify each version with "
            "evaluate_candidate; otherwise say clearly that a version is unverified."
        )
        return (
            "Optimize the CUDA code below with the ReGraph reasoning graph.\n"
            f"1. Call next_techniques(code, technique='{INITIAL_TECHNIQUE}') (later: the technique you last "
            "applied). Prefer transitions with many verified examples and a high success rate and median "
            "speedup; read the closest example's code_before/code_after to see how the technique was applied.\n"
            "2. Apply one technique at a time, keeping the program's behaviour.\n"
            f"3. {task_line}\n"
            "4. Repeat from the technique you applied until no successor improves the code; report the path of "
            "techniques, the verdicts and the measured speedups (never claim a speedup that was not measured).\n"
            "For a longer autonomous search, start_optimization runs the graph search as a job.\n\n"
            f"```cuda\n{code}\n```"
        )

    @server.prompt(name="next_technique", title="Explain which technique to try next and why")
    async def next_technique(code: str, ctx: Context, technique: str = INITIAL_TECHNIQUE) -> str:
        """The graph's successors of `technique` for this code, with the evidence, and a request to choose."""
        try:
            await ready()
            found = await service(ctx).next_techniques(code, technique, 1)
        except (McpServiceError, ToolError) as e:
            found = {"successors": [], "note": f"the graph could not be asked: {e}"}
        lines = []
        for successor in found.get("successors", []):  # ranked by the service, best supported first
            closest = successor["examples"][0] if successor["examples"] else None
            lines.append(
                f"- {successor['technique']}: {successor['evidence']}"
                + (
                    f"; closest example {closest['id']} (similarity {closest['similarity']:.2f}, "
                    f"task {closest['task_id']})"
                    if closest
                    else ""
                )
            )
        evidence = "\n".join(lines) or f"(none: {found.get('note', 'no transition out of this technique')})"
        return (
            f"The code below is at the technique '{technique}'. The reasoning graph records these next "
            f"techniques, with how they fared on other code:\n{evidence}\n\n"
            "Explain which technique to try next for this code and why: weigh the statistics against what the "
            "code does (memory access pattern, divergence, arithmetic intensity), and read the closest example "
            "(resource regraph://examples/<id>) before deciding. Say what you would change in the code.\n\n"
            f"```cuda\n{code}\n```"
        )

    return server


def answer(data: dict[str, Any]) -> CallToolResult:
    """A tool's result as one compact JSON text block; the same data is not repeated as structured
    content, which would double what an agent's context receives."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)])
