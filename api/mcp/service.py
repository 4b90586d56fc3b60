"""What the MCP tools, resources and prompts do, over the API's own services (no MCP imports here).

Every operation goes through a service the HTTP API uses too: the graph service (retrieval, technique
search, examples, review), the read-only Cypher path of ``/v1/cypher``, the job service of
``/v1/optimize`` (the same queue and the same jobs), and the executor client that optimization jobs
use. Blocking calls run in worker threads, so a slow read or a long evaluation never holds up the
server. Graph work is bounded twice: every transaction of the tools' store carries the read time limit
as a server-side timeout (Neo4j stops it, lock waits included, and the worker thread is free again),
and the tool itself stops waiting a few seconds later (`BACKSTOP_S`) in case Neo4j does not answer at
all. Either way the agent gets a tool error saying so instead of a call that never ends. Results are plain JSON-able dicts, cut to a size limit with a
note saying what was cut (`cap`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from api.auth import Caller
from api.graph.protocol import CypherRequest, ExamplePublic, RetrieveRequest, ReviewRequest
from api.graph.service import (
    GraphService,
    GraphServiceError,
    GraphUnavailableError,
    InvalidGraphRequestError,
)
from api.limits import LimitError, Ticket
from api.mcp.answers import DEFAULT_ANSWER_CHARS, concise_successors
from api.mcp.protocol import CandidateEvaluationPublic, JobStatus, McpSettings
from api.optimize.protocol import JobPublic, OptimizeCreate, OptimizeResult
from api.optimize.service import JobService, OptimizeError, Subscription, resolve_task
from api.routers.cypher import run_reader_cypher
from api.state import AppState
from executor.client import AsyncExecutorClient, ExecutorClientError
from executor.errors import TaskFormatError
from executor.protocol import Task
from executor.taskformat import load_task
from graphdb.errors import GraphDBError
from graphdb.jobs import JobEventRecord
from graphdb.models import ReviewStatus, Role, StepVerdict
from graphdb.schema import GraphSchema, SchemaReadError, read_schema
from graphdb.store import Neo4jGraphStore
from search.errors import EvaluatorUnavailableError
from search.evaluation import evaluation_from_verdict
from search.protocols import INITIAL_TECHNIQUE

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

EXAMPLE_SCAN_LIMIT = 2_000
"""Most examples of one transition looked at when filtering by device or verdict."""
_EXAMPLE_PAGE = 200
_SHORTEST_CUT = 200  # strings are never cut below this many characters
BACKSTOP_S = 5.0
"""How much longer than its server-side timeout a tool waits for the graph before giving up on it: Neo4j
checks timeouts every 2 s (db.transaction.monitor.check.interval), plus the round trip."""
PROGRESS_EVERY_S = 5.0
"""How often a running evaluation reports that it still runs."""


class McpServiceError(Exception):
    """Root of the MCP service's errors (each becomes a tool error with its message)."""


class McpInputError(McpServiceError):
    """The arguments cannot be used (unknown name, invalid task, malformed filter...)."""


class McpForbiddenError(McpServiceError):
    """The caller's role is too low for this tool."""


class McpUnavailableError(McpServiceError):
    """A service behind the tool (graph, executor, job store) is not there or did not answer in time."""


class McpLimitError(McpServiceError):
    """The caller's key (or the whole server) already runs as many calls of this kind as it may."""


# -- result size ------------------------------------------------------------------------------------------


def _size(data: Any) -> int:
    return len(json.dumps(data, default=str, ensure_ascii=False))


def _shorten_strings(data: Any, limit: int) -> Any:
    if isinstance(data, str) and len(data) > limit:
        return f"{data[:limit]}... [cut: {len(data) - limit} more characters]"
    if isinstance(data, dict):
        return {k: _shorten_strings(v, limit) for k, v in data.items()}
    if isinstance(data, list):
        return [_shorten_strings(v, limit) for v in data]
    return data


def _largest_list(data: Any) -> list[Any] | None:
    """The list (anywhere in `data`) whose JSON is largest, among lists of two or more items."""
    best: list[Any] | None = None
    best_size = -1
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            if len(item) > 1:
                size = _size(item)
                if size > best_size:
                    best, best_size = item, size
            stack.extend(item)
    return best


def cap(data: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """`data` cut to at most about `max_chars` characters of JSON, with a `note` saying what was cut.

    Long strings (code) are shortened first, down to a floor; then the largest lists lose their tail.
    """
    if _size(data) <= max_chars:
        return data
    notes: list[str] = []
    limit = 8_000
    shortened: Any = data
    while limit >= _SHORTEST_CUT:
        shortened = _shorten_strings(data, limit)
        if _size(shortened) <= max_chars:
            break
        limit //= 2
    limit = max(limit, _SHORTEST_CUT)
    notes.append(f"strings longer than {limit} characters were cut")
    cut: dict[str, Any] = json.loads(json.dumps(shortened, default=str))  # a copy whose lists may be cut
    dropped = 0
    while _size(cut) > max_chars:
        longest = _largest_list(cut)
        if longest is None:
            break
        keep = len(longest) // 2
        dropped += len(longest) - keep
        del longest[keep:]
    if dropped:
        notes.append(f"{dropped} list items were left out")
    note = (
        f"result cut to fit {max_chars} characters: {'; '.join(notes)}. Ask for less "
        "(a smaller limit, a narrower query) or read one item at a time."
    )
    previous = cut.get("note")
    cut["note"] = f"{previous} {note}" if previous else note
    return cut


def dump(model: BaseModel) -> dict[str, Any]:
    """A wire model as JSON-able data."""
    data: dict[str, Any] = model.model_dump(mode="json")
    return data


# -- the service ------------------------------------------------------------------------------------------


@dataclass
class ProgressReporter:
    """Where a long operation reports progress (the MCP progress notification of the call, if asked for)."""

    report: Callable[[float, float | None, str], Awaitable[None]]


async def _no_progress(progress: float, total: float | None, message: str) -> None:
    return None


NO_PROGRESS = ProgressReporter(_no_progress)


def require(caller: Caller, role: Role) -> None:
    """Raise `McpForbiddenError` unless `caller` has at least `role`."""
    if not caller.may(role):
        who = "anonymous callers only read" if caller.key_id is None else f"the key {caller.name!r}"
        raise McpForbiddenError(
            f"this tool needs an API key with the {role.value} role; {who} ({caller.role.value})"
        )


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


class ReasoningGraphService:
    """The MCP server's operations over the running API's state (graph, driver, jobs, settings)."""

    def __init__(self, state: AppState, settings: McpSettings) -> None:
        """Serve from `state` (opened by the API's lifespan or by `regraph mcp`) within `settings`."""
        if state.graph_store is None or state.embedder is None:
            raise McpUnavailableError("the graph store is starting or stopping")
        self.state = state
        self.settings = settings
        # The tools' own store over the API's driver: each transaction carries the read time limit.
        store = Neo4jGraphStore(state.driver, state.target.database, timeout_s=settings.read_timeout_s)
        self.graph = GraphService(store, state.embedder)

    # -- plumbing -----------------------------------------------------------------------------------------

    async def _bounded(self, timeout_s: float, call: Callable[[], Awaitable[T]]) -> T:
        """Await `call()`, giving up `BACKSTOP_S` after `timeout_s` (the server-side limit it runs under)."""
        try:
            with anyio.fail_after(timeout_s + BACKSTOP_S):
                return await call()
        except TimeoutError as e:
            raise McpUnavailableError(
                f"the graph database did not answer within {timeout_s + BACKSTOP_S:g} s "
                f"(limit REGRAPH_MCP_READ_TIMEOUT_S={self.settings.read_timeout_s:g} s); it may be "
                "overloaded or down: try again later"
            ) from e

    async def _read(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking graph read in a worker thread, within the read time limit."""

        async def in_thread() -> T:
            return await anyio.to_thread.run_sync(lambda: call(*args, **kwargs), abandon_on_cancel=True)

        try:
            return await self._bounded(self.settings.read_timeout_s, in_thread)
        except GraphUnavailableError as e:
            raise McpUnavailableError(
                f"{e} (limit REGRAPH_MCP_READ_TIMEOUT_S={self.settings.read_timeout_s:g} s)"
            ) from e
        except InvalidGraphRequestError as e:
            raise McpInputError(str(e)) from e
        except GraphServiceError as e:
            raise McpInputError(str(e)) from e
        except GraphDBError as e:
            raise McpUnavailableError(f"the graph failed: {e}") from e

    async def _jobs_call(self, call: Callable[[], Awaitable[T]]) -> T:
        """A job service call (its records live in the graph database), bounded like a graph read."""
        try:
            return await self._bounded(self.settings.read_timeout_s, call)
        except OptimizeError as e:
            raise McpInputError(str(e)) from e

    def capped(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` within the result size limit."""
        return cap(data, self.settings.max_result_chars)

    @property
    def jobs(self) -> JobService:
        """The API's job service (the queue that /v1/optimize feeds)."""
        if self.state.jobs is None:
            raise McpUnavailableError("the job service is starting or stopping")
        return self.state.jobs

    # -- knowledge ----------------------------------------------------------------------------------------

    async def search_techniques(self, query: str, k: int) -> dict[str, Any]:
        """Techniques matching free text (full-text and vector rankings fused), best first."""
        found = await self._read(self.graph.search_techniques, query, k)
        return self.capped(dump(found))

    async def next_techniques(
        self,
        code: str,
        technique: str,
        k: int,
        *,
        include_code: bool = False,
        max_chars: int = DEFAULT_ANSWER_CHARS,
    ) -> dict[str, Any]:
        """Successors of `technique` for `code`, ranked, each with one line of evidence and its top-`k`
        examples (MCGS's retrieval); the examples' code only with `include_code`, within `max_chars`."""
        try:
            request = RetrieveRequest(technique=technique or INITIAL_TECHNIQUE, code=code, k=k)
        except ValidationError as e:
            raise McpInputError(f"invalid arguments: {e}") from e
        found = await self._read(self.graph.retrieve, request)
        data = concise_successors(found, include_code=include_code, max_chars=max_chars)
        if not found.successors:
            data["note"] = (
                f"the graph has no transition out of {request.technique!r}; search the techniques "
                "(search_techniques) for the name the graph uses"
            )
        return data

    def list_tasks(self, query: str = "") -> dict[str, Any]:
        """The service's tasks (the ids `task_ref` takes), those whose id, domain or description holds
        `query` when one is given."""
        tasks_dir = self.state.settings.tasks_dir
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
        return self.capped(data)

    async def transition_examples(
        self,
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
            page = await self._read(
                self.graph.list_examples,
                source=source,
                target=target,
                status=review_status,
                limit=limit,
                offset=offset,
            )
            return self.capped(dump(page))
        matching: list[ExamplePublic] = []
        scanned = 0
        while scanned < EXAMPLE_SCAN_LIMIT:
            page = await self._read(
                self.graph.list_examples,
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
        return self.capped(data)

    async def cypher(
        self, key: str, query: str, parameters: dict[str, Any], row_limit: int | None
    ) -> dict[str, Any]:
        """A read-only Cypher query of `key` through the path of /v1/cypher: its lexical guard, Neo4j's EXPLAIN
        verdict, a read transaction with a server-side timeout, its row and byte limits, and the same
        slots (`api.limits`): a call cancelled or past its limit stops its query and frees its connection."""
        try:
            request = CypherRequest(query=query, parameters=parameters, row_limit=row_limit)
        except ValidationError as e:
            raise McpInputError(f"invalid arguments: {e}") from e
        settings = self.state.settings
        try:
            response = await run_reader_cypher(self.state, key, request)
        except LimitError as e:
            raise McpLimitError(str(e)) from e
        except GraphUnavailableError as e:
            raise McpUnavailableError(str(e)) from e
        except GraphServiceError as e:
            raise McpInputError(str(e)) from e
        data = dump(response)
        if response.truncated:
            data["note"] = (
                f"only the first {len(response.rows)} rows (limits: {response.row_limit} rows, "
                f"{settings.cypher_max_response_bytes} bytes): the query returned more. Aggregate, filter "
                "or page (SKIP/LIMIT) to see the rest."
            )
        return self.capped(data)

    async def schema(self) -> GraphSchema:
        """The graph's compact schema."""
        timeout_s = self.state.settings.cypher_timeout_s
        try:
            return await self._bounded(
                timeout_s,
                lambda: anyio.to_thread.run_sync(
                    lambda: read_schema(self.state.driver, self.state.target.database, timeout_s=timeout_s),
                    abandon_on_cancel=True,
                ),
            )
        except SchemaReadError as e:
            raise McpUnavailableError(str(e)) from e

    async def list_techniques(self) -> dict[str, Any]:
        """Every technique's name, description and aliases (one page of up to 1000)."""
        page = await self._read(self.graph.list_techniques, 1000, 0)
        items = [{"name": t.name, "description": t.description, "aliases": t.aliases} for t in page.items]
        return self.capped({"techniques": items, "count": len(items)})

    async def technique(self, name: str) -> dict[str, Any]:
        """One technique with the transitions out of it (their statistics, no examples)."""
        found = await self._read(self.graph.get_technique, name)
        # No code to rank examples for: the transitions alone (k=0 reads no example and embeds nothing).
        successors = await self._read(self.graph.store.successors, found.name, [], 0)
        return self.capped(
            {
                **dump(found),
                "successors": [
                    {"technique": s.transition.target, "stats": s.transition.stats.model_dump(mode="json")}
                    for s in successors
                ],
            }
        )

    async def example(self, example_id: str) -> dict[str, Any]:
        """One example with its code before and after."""
        return self.capped(dump(await self._read(self.graph.get_example, example_id)))

    async def review_example(
        self, caller: Caller, example_id: str, decision: str, reason: str
    ) -> dict[str, Any]:
        """Approve or reject an example (curators and admins only; recorded in the audit log)."""
        require(caller, Role.CURATOR)
        try:
            request = ReviewRequest.model_validate({"decision": decision, "reason": reason})
        except ValidationError as e:
            raise McpInputError(f"invalid arguments: {e}") from e
        reviewed = await self._read(self.graph.review_example, example_id, request, actor=caller.name)
        return self.capped(dump(reviewed))

    # -- executor -----------------------------------------------------------------------------------------

    def resolve_task(self, task_ref: str | None, task: dict[str, Any] | None) -> Task:
        """The task named by `task_ref` (settings.tasks_dir) or given inline; raises `McpInputError`."""
        return self._task(task_ref, task)

    def _task(self, task_ref: str | None, task: dict[str, Any] | None) -> Task:
        try:
            request = OptimizeCreate.model_validate({"task_ref": task_ref, "task": task})
            return resolve_task(request, self.state.settings.tasks_dir).task
        except ValidationError as e:
            raise McpInputError(f"invalid task: {e}") from e
        except OptimizeError as e:
            raise McpInputError(str(e)) from e

    async def evaluate(
        self,
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
        url = self.state.settings.executor_url
        if url is None:
            raise McpUnavailableError(
                "no executor is configured: set REGRAPH_EXECUTOR_URL (or start the stack with `regraph up`)"
            )
        resolved = self._task(task_ref, task)
        if isinstance(slot, Ticket):
            return await self._evaluate(source, resolved, progress, caller_id)
        try:
            held = self.state.limiter.slot("evaluation", slot)
            async with held:
                return await self._evaluate(source, resolved, progress, caller_id)
        except LimitError as e:
            raise McpLimitError(str(e)) from e

    def evaluation_slot(self, key: str) -> Ticket:
        """One of `key`'s evaluation slots now (for an evaluation started as a job), or `McpLimitError`."""
        try:
            return self.state.limiter.take("evaluation", key)
        except LimitError as e:
            raise McpLimitError(str(e)) from e

    async def _evaluate(
        self, source: str, resolved: Task, progress: ProgressReporter, caller_id: str | None
    ) -> CandidateEvaluationPublic:
        url = self.state.settings.executor_url
        assert url is not None
        started = time.monotonic()
        # The async client: cancelling this call (cancel_evaluation, a client gone, shut-down) closes the
        # executor request with it, so no thread is left waiting minutes for a verdict nobody reads.
        async with AsyncExecutorClient(url, timeout_s=self.state.settings.executor_timeout_s) as client:
            try:
                await progress.report(0, 2, "asking the executor what it can verify")
                device = await client.device()
                mode: Any = "verified" if device.runtime_checks_available else "compile-only"
                await progress.report(1, 2, f"evaluating ({mode})")
                evaluation = asyncio.ensure_future(client.evaluate(resolved, source, caller=caller_id))
                try:
                    while True:
                        done, _ = await asyncio.wait({evaluation}, timeout=PROGRESS_EVERY_S)
                        if done:
                            break
                        await progress.report(
                            1, 2, f"evaluating ({mode}): {time.monotonic() - started:.0f} s"
                        )
                finally:
                    if not evaluation.done():  # this call was cancelled: so is the request
                        evaluation.cancel()
                        await asyncio.wait({evaluation})
                verdict = evaluation.result()
                judged = evaluation_from_verdict(verdict, mode)
            except (EvaluatorUnavailableError, ExecutorClientError) as e:
                raise McpUnavailableError(f"the executor could not judge the candidate: {e}") from e
            except ValidationError as e:
                raise McpUnavailableError(
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

    # -- optimization jobs --------------------------------------------------------------------------------

    async def start_optimization(self, caller: Caller, request: dict[str, Any]) -> dict[str, Any]:
        """Queue an optimization job of `caller` on the API's job service; returns its id at once."""
        try:
            body = OptimizeCreate.model_validate(request)
        except ValidationError as e:
            raise McpInputError(f"invalid optimization request: {e}") from e
        record = await self._jobs_call(lambda: self.jobs.submit(body, owner=caller.job_owner))
        return {
            "job_id": record.id,
            "state": record.state,
            "task_id": record.task_id,
            "result_uri": f"regraph://jobs/{record.id}/result",
            "hint": "follow it with job_status(job_id, wait_s=...) (progress notifications), cancel with "
            "cancel_job",
        }

    async def _job(self, caller: Caller, job_id: str) -> JobPublic:
        return JobPublic.of(await self._jobs_call(lambda: self.jobs.get(job_id, owner=caller.job_scope)))

    async def job_status(
        self, caller: Caller, job_id: str, *, wait_s: float, progress: ProgressReporter = NO_PROGRESS
    ) -> dict[str, Any]:
        """The job in brief (only `caller`'s own, admins' any); with `wait_s` > 0, follow its events (as
        progress) until it ends or time is up."""
        job = await self._job(caller, job_id)
        lines: list[str] = []
        wait_s = min(wait_s, self.settings.max_wait_s)
        if wait_s > 0 and job.state not in ("succeeded", "failed", "cancelled"):
            budget = float(job.request.get("budget") or 0) or None
            candidates = 0
            subscription = await self._subscribe(caller, job_id)
            try:
                with anyio.move_on_after(wait_s):
                    async for item in _events(subscription):
                        line = _event_line(item)
                        lines.append(line)
                        candidates += item.kind == "candidate"
                        await progress.report(candidates, budget, line)
            finally:
                subscription.close()
            job = await self._job(caller, job_id)
        return self.capped(dump(_status(job, lines)))

    async def _subscribe(self, caller: Caller, job_id: str) -> Subscription:
        return await self._jobs_call(lambda: self.jobs.subscribe(job_id, owner=caller.job_scope))

    async def cancel_job(self, caller: Caller, job_id: str) -> dict[str, Any]:
        """Cancel a queued or running job of `caller`'s (admins: anyone's)."""
        record = await self._jobs_call(lambda: self.jobs.cancel(job_id, owner=caller.job_scope))
        return self.capped(dump(_status(JobPublic.of(record), [])))

    async def job_result(self, caller: Caller, job_id: str) -> dict[str, Any]:
        """A job's full result (every candidate with its verdict), once it has ended; `caller`'s own only
        (admins: any)."""
        job = await self._job(caller, job_id)
        if job.result is None:
            return {"job_id": job.id, "state": job.state, "error": job.error, "result": None}
        return self.capped({"job_id": job.id, "state": job.state, "result": dump(job.result)})


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
