"""Evaluations as MCP tools: one candidate compiled, checked and timed by the executor, waited for
(``evaluate_candidate``) or as a job (``start_evaluation``, ``evaluation_status``, ``cancel_evaluation``),
and the tasks it can be checked against (``list_tasks``, resource ``regraph://tasks``).

What an evaluation verifies is decided as for an optimization run, by `search.run.choose_verification`
(``auto``: verified where the executor has a GPU runtime, else compile-only, never a pass).
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from api.auth import ANONYMOUS, Caller
from api.errors import ServiceError, ServiceErrorKind, ServiceUnavailableError
from api.evaluations.models import CandidateEvaluationPublic
from api.limits import Ticket
from api.mcp.evaluations import EvaluationJobs
from api.mcp.service import NO_PROGRESS, ProgressReporter, ReasoningGraphService, dump
from api.mcp.tools import READ_ONLY, McpTools, progress_of
from api.optimize.models import MAX_SOURCE_CHARS, OptimizeCreate
from api.optimize.service import resolve_task
from executor.client import AsyncExecutorClient, ExecutorClient, ExecutorClientError
from executor.errors import TaskFormatError
from executor.protocol import Task
from executor.taskformat import load_task
from search.errors import EvaluatorUnavailableError
from search.evaluation import VerificationMode, evaluation_from_verdict
from search.run import choose_verification

PROGRESS_EVERY_S = 5.0
"""How often a running evaluation reports that it still runs."""

CandidateSource = Annotated[
    str, Field(min_length=1, max_length=MAX_SOURCE_CHARS, description="your candidate's source")
]
TaskRef = Annotated[str | None, Field(description="a task id of the service's task library")]
InlineTask = Annotated[dict[str, Any] | None, Field(description="or the task inline (regraph.task/v1)")]


def tasks_of(s: ReasoningGraphService, query: str = "") -> dict[str, Any]:
    """The service's tasks (the ids `task_ref` takes), those whose id, domain or description holds
    `query` when one is given."""
    tasks_dir = s.state.settings.tasks_dir
    if tasks_dir is None or not tasks_dir.is_dir():
        return {
            "tasks": [],
            "note": "no tasks directory is configured (REGRAPH_TASKS_DIR): send tasks inline",
        }
    wanted = query.strip().lower()
    tasks: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in sorted(p for p in tasks_dir.iterdir() if (p / "task.json").is_file()):
        try:
            task = load_task(path)
        except TaskFormatError as e:
            problems.append(f"{path.name}: {e}")
            continue
        entry = {
            "id": task.id,
            "kind": task.kind,
            "domain": task.domain,
            "tier": task.tier_hint,
            "description": task.description,
        }
        if not wanted or any(wanted in str(v).lower() for v in (task.id, task.domain, task.description)):
            tasks.append(entry)
    data: dict[str, Any] = {"tasks": tasks, "count": len(tasks)}
    if problems:
        data["unreadable"] = problems
    return s.capped(data)


def verification_of(url: str, timeout_s: float) -> VerificationMode:
    """What an evaluation on the executor at `url` verifies, decided as an optimization run decides it."""
    with ExecutorClient(url, timeout_s=timeout_s) as client:
        return choose_verification(client, "auto")


def task_of(s: ReasoningGraphService, task_ref: str | None, task: dict[str, Any] | None) -> Task:
    """The task named by `task_ref` (settings.tasks_dir) or given inline."""
    try:
        request = OptimizeCreate.model_validate({"task_ref": task_ref, "task": task})
    except ValidationError as e:
        raise ServiceError(f"invalid task: {e}", kind=ServiceErrorKind.INVALID) from e
    return resolve_task(request, s.state.settings.tasks_dir).task


async def evaluate(
    s: ReasoningGraphService,
    source: str,
    *,
    task_ref: str | None,
    task: dict[str, Any] | None,
    slot: str | Ticket,
    progress: ProgressReporter = NO_PROGRESS,
    caller_id: str | None = None,
) -> CandidateEvaluationPublic:
    """Judge `source` against a task on the executor: compiled, checked and timed where it has a GPU
    (on behalf of `caller_id`, the key whose share of the executor's slots it takes).

    It runs under an evaluation slot (`api.limits`): `slot` is the caller's key (a slot is taken for
    the call, refused past the key's share) or a slot the caller already holds (and gives back)."""
    url = s.state.settings.executor_url
    if url is None:
        raise ServiceUnavailableError(
            "no executor is configured: set REGRAPH_EXECUTOR_URL (or start the stack with `regraph up`)"
        )
    resolved = task_of(s, task_ref, task)
    if isinstance(slot, Ticket):
        return await _evaluate(s, source, resolved, progress, caller_id)
    async with s.state.limiter.slot("evaluation", slot):
        return await _evaluate(s, source, resolved, progress, caller_id)


def evaluation_slot(s: ReasoningGraphService, key: str) -> Ticket:
    """One of `key`'s evaluation slots now (for an evaluation started as a job), or a `LimitError`."""
    return s.state.limiter.take("evaluation", key)


async def _evaluate(
    s: ReasoningGraphService, source: str, resolved: Task, progress: ProgressReporter, caller_id: str | None
) -> CandidateEvaluationPublic:
    url = s.state.settings.executor_url
    assert url is not None
    started = time.monotonic()
    # The async client: cancelling this call (cancel_evaluation, a client gone, shut-down) closes the
    # executor request with it, so no thread is left waiting minutes for a verdict nobody reads.
    timeout_s = s.state.settings.executor_timeout_s
    async with AsyncExecutorClient(url, timeout_s=timeout_s) as client:
        try:
            await progress.report(0, 2, "asking the executor what it can verify")
            mode = await anyio.to_thread.run_sync(verification_of, url, timeout_s, abandon_on_cancel=True)
            await progress.report(1, 2, f"evaluating ({mode})")
            evaluation = asyncio.ensure_future(client.evaluate(resolved, source, caller=caller_id))
            try:
                while True:
                    done, _ = await asyncio.wait({evaluation}, timeout=PROGRESS_EVERY_S)
                    if done:
                        break
                    await progress.report(1, 2, f"evaluating ({mode}): {time.monotonic() - started:.0f} s")
            finally:
                if not evaluation.done():  # this call was cancelled: so is the request
                    evaluation.cancel()
                    await asyncio.wait({evaluation})
            verdict = evaluation.result()
            judged = evaluation_from_verdict(verdict, mode)
        except (EvaluatorUnavailableError, ExecutorClientError) as e:
            raise ServiceUnavailableError(f"the executor could not judge the candidate: {e}") from e
        except ValidationError as e:
            raise ServiceUnavailableError(
                f"the executor answered something that is not a verdict: {e}"
            ) from e
    await progress.report(2, 2, "passed" if judged.passed else f"not passed: {judged.error_kind}")
    return CandidateEvaluationPublic(
        task_id=resolved.id,
        verification=mode,
        passed=judged.passed,
        speedup=judged.speedup,
        error_kind=judged.error_kind,
        message=judged.message,
        verdict=verdict,
    )


async def start_job(
    s: ReasoningGraphService,
    evaluations: EvaluationJobs,
    caller: Caller,
    source: str,
    *,
    task_ref: str | None,
    task: dict[str, Any] | None,
) -> dict[str, Any]:
    """Start evaluating `source` as one of `evaluations`, for `caller`; its id at once."""
    resolved = task_of(s, task_ref, task)
    # The slot is taken now (refused at once past the key's share) and held until the job ends.
    ticket = evaluation_slot(s, caller.key_id or ANONYMOUS)

    async def run_job(progress: ProgressReporter) -> dict[str, Any]:
        judged = await evaluate(
            s,
            source,
            task_ref=task_ref,
            task=task,
            slot=ticket,
            progress=progress,
            caller_id=caller.job_owner,
        )
        return s.capped(dump(judged))

    try:
        job = evaluations.start(caller.job_owner, resolved.id, run_job)
    except BaseException:
        ticket.release()
        raise
    assert job.task is not None
    job.task.add_done_callback(lambda _task: ticket.release())
    return {
        **job.public(),
        "hint": "follow it with evaluation_status(evaluation_id, wait_s=...), cancel with cancel_evaluation",
    }


def register(server: MCPServer, tools: McpTools) -> None:
    """Add the evaluations' tools and the tasks resource to `server`."""

    @server.tool(annotations=READ_ONLY)
    async def list_tasks(
        ctx: Context,
        query: Annotated[
            str, Field(max_length=200, description="only tasks whose id, domain or description holds this")
        ] = "",
    ) -> CallToolResult:
        """The tasks this service can verify code against (their ids are what task_ref takes), with kind,
        domain, tier and a one-line description. Call it before evaluate_candidate or start_optimization."""

        async def listing(s: ReasoningGraphService) -> dict[str, Any]:
            return tasks_of(s, query)

        return await tools.call(ctx, listing)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def evaluate_candidate(
        source: CandidateSource, ctx: Context, task_ref: TaskRef = None, task: InlineTask = None
    ) -> CallToolResult:
        """Verify a candidate against a task on the executor: static checks, compile, then (on a GPU) check
        against the reference on fresh inputs and time it. Returns the executor's typed verdict; without a
        GPU the verdict is compile-only and never a pass. Sends progress notifications while it runs."""

        caller = tools.caller(ctx)
        key = caller.key_id or ANONYMOUS

        async def run(s: ReasoningGraphService) -> dict[str, Any]:
            judged = await evaluate(
                s,
                source,
                task_ref=task_ref,
                task=task,
                slot=key,
                progress=progress_of(ctx),
                caller_id=caller.job_owner,
            )
            return s.capped(dump(judged))

        return await tools.call(ctx, run)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def start_evaluation(
        source: CandidateSource, ctx: Context, task_ref: TaskRef = None, task: InlineTask = None
    ) -> CallToolResult:
        """evaluate_candidate as a job, for evaluations longer than your client waits for one call: returns
        an evaluation id at once; follow it with evaluation_status(evaluation_id, wait_s=...) (progress
        notifications, then the verdict), cancel it with cancel_evaluation."""
        caller = tools.caller(ctx)
        return await tools.call(
            ctx, lambda s: start_job(s, tools.evaluations, caller, source, task_ref=task_ref, task=task)
        )

    @server.tool(annotations=READ_ONLY)
    async def evaluation_status(
        evaluation_id: Annotated[str, Field(min_length=1, max_length=100)],
        ctx: Context,
        wait_s: Annotated[
            float, Field(ge=0, le=3600, description="follow it (progress notifications) up to this long")
        ] = 0.0,
    ) -> CallToolResult:
        """An evaluation's state, its progress and, once finished, the executor's verdict (as
        evaluate_candidate returns it). With wait_s > 0 the call follows it until it ends or time is up."""
        caller = tools.caller(ctx)

        async def status(s: ReasoningGraphService) -> dict[str, Any]:
            job = tools.evaluations.get(evaluation_id, caller.job_scope)
            await tools.evaluations.follow(job, min(wait_s, s.settings.max_wait_s), progress_of(ctx))
            return s.capped(job.public())

        return await tools.call(ctx, status)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
    async def cancel_evaluation(
        evaluation_id: Annotated[str, Field(min_length=1, max_length=100)], ctx: Context
    ) -> CallToolResult:
        """Cancel a running evaluation (its verdict, if the executor still sends one, is dropped)."""
        caller = tools.caller(ctx)

        async def cancel(s: ReasoningGraphService) -> dict[str, Any]:
            return (await tools.evaluations.cancel(evaluation_id, caller.job_scope)).public()

        return await tools.call(ctx, cancel)

    @server.resource("regraph://tasks", name="tasks", mime_type="application/json")
    async def tasks_resource() -> dict[str, Any]:
        """The service's tasks: the ids task_ref takes, with kind, domain, tier and description."""

        async def read(s: ReasoningGraphService) -> dict[str, Any]:
            return tasks_of(s)

        return await tools.read(None, read)
