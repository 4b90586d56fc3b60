"""Optimization jobs as MCP tools, a resource and a prompt: start the graph-guided search as a job (the
API's job queue, as POST /v1/optimize), follow it, cancel it, read its full result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from api.auth import Caller
from api.errors import ServiceError, ServiceErrorKind
from api.mcp.service import NO_PROGRESS, ProgressReporter, ReasoningGraphService, dump
from api.mcp.tools import READ_ONLY, McpTools, progress_of
from api.optimize.events import Subscription
from api.optimize.models import MAX_SOURCE_CHARS, JobPublic, JobStatus, OptimizeCreate, OptimizeResult
from graphdb.jobs import JobEventRecord
from graphdb.models import INITIAL_TECHNIQUE
from search.baselines import Method


def _event_line(event: JobEventRecord | Any) -> str:
    kind: str = event.kind
    data: dict[str, Any] = event.payload if isinstance(event, JobEventRecord) else event.data
    if kind == "state":
        return f"state: {data.get('state')}" + (f" ({data['error']})" if data.get("error") else "")
    if kind == "candidate":
        candidate = data.get("candidate") or {}
        evaluation = candidate.get("evaluation") or {}
        outcome = (
            "passed"
            if evaluation.get("passed")
            else evaluation.get("error_kind") or candidate.get("failure_kind") or "no code"
        )
        return f"candidate #{candidate.get('index')}: {candidate.get('technique')} -> {outcome}"
    if kind == "new_best":
        return f"new best: {data.get('best_speedup')}x (candidate #{data.get('best_index')})"
    return f"{kind}: {data.get('evaluations_used', '?')} evaluations used"


async def start(s: ReasoningGraphService, caller: Caller, request: dict[str, Any]) -> dict[str, Any]:
    """Queue an optimization job of `caller` on the API's job service; returns its id at once."""
    try:
        body = OptimizeCreate.model_validate(request)
    except ValidationError as e:
        raise ServiceError(f"invalid optimization request: {e}", kind=ServiceErrorKind.INVALID) from e
    record = await s.jobs_call(lambda: s.jobs.submit(body, owner=caller.job_owner))
    return {
        "job_id": record.id,
        "state": record.state,
        "task_id": record.task_id,
        "result_uri": f"regraph://jobs/{record.id}/result",
        "hint": "follow it with job_status(job_id, wait_s=...) (progress notifications), cancel with "
        "cancel_job",
    }


async def _job(s: ReasoningGraphService, caller: Caller, job_id: str) -> JobPublic:
    return JobPublic.of(await s.jobs_call(lambda: s.jobs.get(job_id, owner=caller.job_scope)))


async def status(
    s: ReasoningGraphService,
    caller: Caller,
    job_id: str,
    *,
    wait_s: float,
    progress: ProgressReporter = NO_PROGRESS,
) -> dict[str, Any]:
    """The job in brief (only `caller`'s own, admins' any); with `wait_s` > 0, follow its events (as
    progress) until it ends or time is up."""
    job = await _job(s, caller, job_id)
    lines: list[str] = []
    wait_s = min(wait_s, s.settings.max_wait_s)
    if wait_s > 0 and job.state not in ("succeeded", "failed", "cancelled"):
        budget = float(job.request.get("budget") or 0) or None
        candidates = 0
        subscription = await _subscribe(s, caller, job_id)
        try:
            with anyio.move_on_after(wait_s):
                async for item in _events(subscription):
                    line = _event_line(item)
                    lines.append(line)
                    candidates += item.kind == "candidate"
                    await progress.report(candidates, budget, line)
        finally:
            subscription.close()
        job = await _job(s, caller, job_id)
    return s.capped(dump(_status(job, lines)))


async def _subscribe(s: ReasoningGraphService, caller: Caller, job_id: str) -> Subscription:
    return await s.jobs_call(lambda: s.jobs.subscribe(job_id, owner=caller.job_scope))


async def cancel(s: ReasoningGraphService, caller: Caller, job_id: str) -> dict[str, Any]:
    """Cancel a queued or running job of `caller`'s (admins: anyone's)."""
    record = await s.jobs_call(lambda: s.jobs.cancel(job_id, owner=caller.job_scope))
    return s.capped(dump(_status(JobPublic.of(record), [])))


async def result_of(s: ReasoningGraphService, caller: Caller, job_id: str) -> dict[str, Any]:
    """A job's full result (every candidate with its verdict), once it has ended; `caller`'s own only
    (admins: any)."""
    job = await _job(s, caller, job_id)
    if job.result is None:
        return {"job_id": job.id, "state": job.state, "error": job.error, "result": None}
    return s.capped({"job_id": job.id, "state": job.state, "result": dump(job.result)})


async def _events(subscription: Subscription) -> AsyncIterator[Any]:
    """A subscription's events, without its keep-alive heartbeats."""
    async for item in subscription:
        if hasattr(item, "kind"):
            yield item


def _status(job: JobPublic, lines: list[str]) -> JobStatus:
    result: OptimizeResult | None = job.result
    return JobStatus(
        id=job.id,
        state=job.state,
        method=job.method,
        task_id=job.task_id,
        error=job.error,
        event_count=job.event_count,
        finished=job.state in ("succeeded", "failed", "cancelled"),
        verification=result.verification if result else None,
        outcome=result.note if result else None,
        counts=result.counts if result else None,
        best_speedup=result.search.best_speedup if result else None,
        best_path=result.search.best_path if result else None,
        best_code=result.search.best_code if result else None,
        result_uri=f"regraph://jobs/{job.id}/result",
        progress=lines,
    )


def register(server: MCPServer, tools: McpTools) -> None:
    """Add the optimization jobs' tools, resource and prompt to `server`."""

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
        caller = tools.caller(ctx)
        return await tools.call(ctx, lambda s: start(s, caller, body))

    @server.tool(annotations=READ_ONLY)
    async def job_status(
        job_id: Annotated[str, Field(min_length=1, max_length=100)],
        ctx: Context,
        wait_s: Annotated[
            float, Field(ge=0, le=3600, description="follow the job (progress notifications) up to this long")
        ] = 0.0,
    ) -> CallToolResult:
        """An optimization job's state and, once finished, its outcome and best code. With wait_s > 0 the
        call follows the job's events as progress notifications until it ends or the time is up."""
        caller = tools.caller(ctx)
        return await tools.call(
            ctx, lambda s: status(s, caller, job_id, wait_s=wait_s, progress=progress_of(ctx))
        )

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
    async def cancel_job(
        job_id: Annotated[str, Field(min_length=1, max_length=100)], ctx: Context
    ) -> CallToolResult:
        """Cancel a queued or running optimization job."""
        caller = tools.caller(ctx)
        return await tools.call(ctx, lambda s: cancel(s, caller, job_id))

    @server.resource("regraph://jobs/{job_id}/result", name="job-result", mime_type="application/json")
    async def job_result_resource(job_id: str, ctx: Context) -> dict[str, Any]:
        """An optimization job's full result: every candidate with its path and verdict, the best code."""
        caller = tools.caller(ctx)
        return await tools.read(ctx, lambda s: result_of(s, caller, job_id))

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
