"""The job runner behind ``/v1/optimize``: optimization jobs as asyncio tasks, persisted in Neo4j.

The optimization itself is `search.run.run_optimization` (the same function the CLI and the benchmark
call); this module only queues jobs, persists them and their events, and fans the events out.

* Bounded concurrency: at most `max_concurrent` searches run at once; later jobs wait in ``queued``.
  One owner (API key) has at most `max_jobs_per_owner` jobs queued or running; more are refused.
* Every state change and search event is appended to the job's events (stored in Neo4j) and fanned
  out to live subscribers; a subscriber first gets the past events, then follows live, and its stream
  ends when the job ends. Finished jobs (and jobs of a previous process) are replayed from Neo4j.
* Cancel: the job's task is cancelled and the job is recorded ``cancelled``.
* A job is never lost silently: on start, jobs a previous process left queued or running are marked
  failed ("interrupted by a restart"); on a clean stop, the jobs still running are marked the same.
* Verification: see `search.run`. With an executor without a GPU a job runs in compile-only mode
  (unless the request insists on verification) and its result says that nothing was verified.

No FastAPI here: the router translates `OptimizeError`s into HTTP errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

from neo4j import Driver

from api.optimize.errors import (
    InvalidTaskError,
    JobAlreadyFinishedError,
    JobStorageError,
    JobUnknownError,
    NotConfiguredError,
    OptimizeError,
    TaskNotFoundError,
    TooManyJobsError,
    no_such_job,
)
from api.optimize.events import Subscription
from api.optimize.models import OptimizeCreate, OptimizeResult
from api.settings import ApiSettings
from executor.client import ExecutorClient
from executor.errors import ExecutorError, TaskFormatError
from executor.protocol import FunctionTask, KernelTask
from executor.taskformat import load_task
from graphdb.errors import GraphDBError, JobNotFoundError, JobStateError
from graphdb.jobs import JobEventRecord, JobRecord, JobStore
from graphdb.store import Neo4jGraphStore
from search.backends.base import ChatModel
from search.backends.config import MODEL_SETTINGS_HINT, RoleConfig, build_model
from search.engine import SearchEvent
from search.errors import SearchError
from search.evaluation import VerificationMode
from search.policy import TaskContext
from search.protocols import KnowledgeSource
from search.relabel.construction import GraphImprovements
from search.run import (
    ImprovementSink,
    TaskInputError,
    VerificationUnavailableError,
    prepare_task,
    run_optimization,
)

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

RESTART_REASON = "interrupted by a restart"


@dataclass
class _Plan:
    task: FunctionTask | KernelTask
    context: TaskContext
    request: OptimizeCreate


@dataclass
class _LiveJob:
    plan: _Plan
    history: list[JobEventRecord] = field(default_factory=list)
    subscribers: set[asyncio.Queue[JobEventRecord | None]] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    stop_reason: str | None = None  # set when the service stops: the job ends failed, not cancelled
    owner: str = ""  # who submitted it ("" unknown), for the per-owner limit


def resolve_task(request: OptimizeCreate, tasks_dir: Path | None) -> _Plan:
    """The task and the starting code a request describes; raises `InvalidTaskError`/`TaskNotFoundError`."""
    if request.task is not None:
        task = request.task
    else:
        assert request.task_ref is not None  # OptimizeCreate requires one of the two
        if tasks_dir is None:
            raise TaskNotFoundError(
                "no tasks directory is configured; set REGRAPH_TASKS_DIR or send the task inline"
            )
        path = tasks_dir / request.task_ref
        if not (path / "task.json").is_file():
            raise TaskNotFoundError(f"no task {request.task_ref!r} in the tasks directory")
        try:
            task = load_task(path)
        except TaskFormatError as e:
            raise InvalidTaskError(f"task {request.task_ref!r} is invalid: {e}") from e
    try:
        task, context = prepare_task(task, request.source)
    except TaskInputError as e:
        raise InvalidTaskError(str(e)) from e
    return _Plan(task=task, context=context, request=request)


class JobService:
    """Runs optimization jobs in the current event loop; create once per process, `start` then `stop`."""

    def __init__(
        self,
        store: JobStore,
        *,
        knowledge: Callable[[], KnowledgeSource],
        generator: RoleConfig | None,
        executor_url: str | None,
        tasks_dir: Path | None,
        max_concurrent: int = 2,
        max_jobs_per_owner: int | None = None,
        retry_after_s: int = 30,
        executor_timeout_s: float = 960.0,
        improvements: Callable[[str], ImprovementSink] | None = None,
        heartbeat_s: float = 15.0,
    ) -> None:
        """`knowledge` and `improvements` (given the job's id) are factories called in a worker thread
        when a job needs them. `max_jobs_per_owner` bounds the jobs one owner has queued or running
        (None: unbounded); past it `submit` raises `TooManyJobsError` carrying `retry_after_s`."""
        self.store = store
        self._knowledge_factory = knowledge
        self._knowledge: KnowledgeSource | None = None
        self.generator = generator
        self.executor_url = executor_url
        self.tasks_dir = tasks_dir
        self.executor_timeout_s = executor_timeout_s
        self._improvements = improvements
        self.heartbeat_s = heartbeat_s
        self._slots = asyncio.Semaphore(max_concurrent)
        self.max_jobs_per_owner = max_jobs_per_owner
        self.retry_after_s = retry_after_s
        self._unfinished: Counter[str] = Counter()  # owner -> jobs accepted and not yet ended
        self._live: dict[str, _LiveJob] = {}
        self._model: ChatModel | None = None
        self._setup_lock = asyncio.Lock()
        self._executor: ExecutorClient | None = None

    # ---- life cycle -----------------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Mark jobs a previous process left unfinished as failed; returns their ids."""
        try:
            return await asyncio.to_thread(
                self.store.fail_unfinished, f"{RESTART_REASON}: the process running it ended"
            )
        except GraphDBError as e:
            raise JobStorageError(f"could not recover unfinished jobs: {e}") from e

    async def stop(self) -> None:
        """Stop every job (recorded failed: interrupted), then release the model and the executor client."""
        live = list(self._live.values())
        for job in live:
            job.stop_reason = f"{RESTART_REASON}: the service stopped while the job ran"
            if job.task is not None:
                job.task.cancel()
        await asyncio.gather(*(j.task for j in live if j.task is not None), return_exceptions=True)
        if self._model is not None:
            await self._model.aclose()
            self._model = None
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    # ---- requests -------------------------------------------------------------------------------

    def check_configured(self) -> None:
        """Raise `NotConfiguredError` when jobs cannot run here, naming the settings to set."""
        if self.generator is None:
            raise NotConfiguredError(f"no generator model is configured: {MODEL_SETTINGS_HINT}")
        if self.executor_url is None:
            raise NotConfiguredError(
                "no executor is configured: set REGRAPH_EXECUTOR_URL (or start the stack with `regraph up`)"
            )

    async def submit(self, request: OptimizeCreate, *, owner: str | None = None) -> JobRecord:
        """Validate and queue a job of `owner` (an API key id); it starts when a slot is free.

        Raises `TooManyJobsError` when `owner` already has `max_jobs_per_owner` jobs queued or running.
        """
        self.check_configured()
        plan = resolve_task(request, self.tasks_dir)
        counted = owner or ""
        limit = self.max_jobs_per_owner
        if limit is not None and self._unfinished[counted] >= limit:
            raise TooManyJobsError(
                f"this key already has {limit} optimization jobs queued or running (the most it may); "
                "wait for one to finish or cancel one",
                self.retry_after_s,
            )
        # Counted before the first await, so that concurrent submissions cannot all pass the check.
        self._unfinished[counted] += 1
        job_id = uuid.uuid4().hex
        try:
            record = await self._store(
                self.store.create,
                job_id,
                method=request.method,
                task_id=plan.task.id,
                request=request.model_dump(mode="json", exclude_none=True),
                owner=owner,
            )
        except BaseException:
            self._release(counted)
            raise
        live = _LiveJob(plan=plan, owner=counted)
        self._live[job_id] = live
        live.task = asyncio.create_task(self._run(job_id, live), name=f"job-{job_id}")
        logger.info("job queued", extra={"job": job_id, "method": request.method, "task": plan.task.id})
        return record

    async def get(self, job_id: str, *, owner: str | None = None) -> JobRecord:
        """The job as stored; with `owner`, someone else's job is unknown (`JobUnknownError`) like a
        missing one, so a caller cannot tell another user's job id from a wrong one."""
        try:
            record = await self._store(self.store.get, job_id)
        except JobNotFoundError as e:
            raise JobUnknownError(no_such_job(job_id)) from e
        if owner is not None and record.owner != owner:
            raise JobUnknownError(no_such_job(job_id))
        return record

    async def list_jobs(
        self, *, limit: int = 50, offset: int = 0, owner: str | None = None
    ) -> list[JobRecord]:
        """Jobs, newest first (only `owner`'s when given)."""
        return await self._store(self.store.list_jobs, limit=limit, offset=offset, owner=owner)

    async def cancel(self, job_id: str, *, owner: str | None = None) -> JobRecord:
        """Cancel a queued or running job (only `owner`'s, when given) and return it once it is
        recorded as cancelled."""
        if owner is not None:
            await self.get(job_id, owner=owner)
        live = self._live.get(job_id)
        if live is None or live.task is None:
            record = await self.get(job_id)
            if record.finished:
                raise JobAlreadyFinishedError(f"job {job_id} already {record.state}")
            # Queued or running but not in this process: nothing runs it, so it can only be cancelled.
            return await self._store(self.store.finish, job_id, "cancelled", error="cancelled by a request")
        live.task.cancel()
        await asyncio.gather(live.task, return_exceptions=True)
        return await self.get(job_id)

    async def subscribe(self, job_id: str, *, after: int = -1, owner: str | None = None) -> Subscription:
        """Follow a job's events with ``seq > after`` (past ones first), only `owner`'s when given;
        raises `JobUnknownError`."""
        if owner is not None:
            await self.get(job_id, owner=owner)
        live = self._live.get(job_id)
        if live is None:
            await self.get(job_id)  # unknown id -> JobUnknownError
            stored = await self._store(self.store.events, job_id, after=after)
            return Subscription(stored, None, lambda: None, self.heartbeat_s, after)
        # No await between copying the history and registering the queue: nothing can slip between.
        queue: asyncio.Queue[JobEventRecord | None] = asyncio.Queue()
        backlog = [e for e in live.history if e.seq > after]
        live.subscribers.add(queue)
        return Subscription(backlog, queue, lambda: live.subscribers.discard(queue), self.heartbeat_s, after)

    def _release(self, owner: str) -> None:
        self._unfinished[owner] -= 1
        if self._unfinished[owner] <= 0:
            del self._unfinished[owner]

    # ---- running --------------------------------------------------------------------------------

    async def _store(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await asyncio.to_thread(call, *args, **kwargs)
        except JobNotFoundError:
            raise
        except JobStateError as e:
            raise JobAlreadyFinishedError(str(e)) from e
        except GraphDBError as e:
            raise JobStorageError(f"the job store failed: {e}") from e

    async def _publish(self, job_id: str, live: _LiveJob, kind: str, payload: dict[str, Any]) -> None:
        event = JobEventRecord(
            job_id=job_id, seq=len(live.history), kind=kind, payload=payload, at=datetime.now(UTC)
        )
        live.history.append(event)
        for queue in live.subscribers:
            queue.put_nowait(event)
        await self._store(self.store.append_event, event)

    async def _dependencies(self) -> tuple[ChatModel, KnowledgeSource, ExecutorClient]:
        async with self._setup_lock:
            if self._model is None:
                assert self.generator is not None  # check_configured ran at submit
                self._model = await asyncio.to_thread(build_model, self.generator)
            if self._knowledge is None:
                self._knowledge = await asyncio.to_thread(self._knowledge_factory)
            if self._executor is None:
                assert self.executor_url is not None
                self._executor = ExecutorClient(self.executor_url, timeout_s=self.executor_timeout_s)
            return self._model, self._knowledge, self._executor

    async def _search(self, job_id: str, live: _LiveJob) -> OptimizeResult:
        plan = live.plan
        request = plan.request
        model, knowledge, executor = await self._dependencies()
        with contextlib.suppress(ExecutorError):  # best effort: the first candidate then waits less
            await asyncio.to_thread(executor.prepare, plan.task)

        async def on_start(mode: VerificationMode) -> None:
            await self._publish(job_id, live, "state", {"state": "running", "verification": mode})

        async def on_event(event: SearchEvent) -> None:
            await self._publish(job_id, live, event.kind, event.model_dump(mode="json"))

        improvements = self._improvements
        try:
            outcome = await run_optimization(
                request.method,
                plan.task,
                plan.context,
                request.search_config(),
                model=model,
                knowledge=knowledge,
                executor=executor,
                verification=request.verification,
                on_event=on_event,
                on_start=on_start,
                improvements=(lambda: improvements(job_id)) if improvements is not None else None,
                caller=live.owner or None,  # the owner's key: its compiles take that key's share
            )
        except VerificationUnavailableError as e:
            raise NotConfiguredError(
                "the job asked for verified results but the executor has no GPU runtime; point "
                "REGRAPH_EXECUTOR_URL at a GPU executor or ask for verification 'compile-only' or 'auto'"
            ) from e
        return OptimizeResult.from_outcome(outcome)

    async def _finish(
        self,
        job_id: str,
        live: _LiveJob,
        state: Literal["succeeded", "failed", "cancelled"],
        *,
        result: OptimizeResult | None = None,
        error: str | None = None,
    ) -> None:
        payload = {"state": state, "error": error}
        await self._publish(job_id, live, "state", payload)
        await self._store(
            self.store.finish,
            job_id,
            state,
            result=result.model_dump(mode="json") if result is not None else None,
            error=error,
        )

    async def _run(self, job_id: str, live: _LiveJob) -> None:
        try:
            await self._publish(job_id, live, "state", {"state": "queued"})
            async with self._slots:
                await self._store(self.store.mark_running, job_id)
                result = await self._search(job_id, live)
            await self._finish(job_id, live, "succeeded", result=result)
            logger.info("job succeeded", extra={"job": job_id})
        except asyncio.CancelledError:
            # Record the end even though this task is being cancelled: shield the writes.
            if live.stop_reason is not None:
                await asyncio.shield(self._finish(job_id, live, "failed", error=live.stop_reason))
            else:
                await asyncio.shield(self._finish(job_id, live, "cancelled", error="cancelled by a request"))
            logger.info("job ended early", extra={"job": job_id, "reason": live.stop_reason or "cancelled"})
        except (SearchError, OptimizeError, ExecutorError, GraphDBError) as e:
            logger.warning("job failed", extra={"job": job_id, "error": str(e)})
            await self._finish(job_id, live, "failed", error=str(e))
        except Exception as e:
            # The job boundary: a bug must still end the job as failed (and be logged), never leave it running.
            logger.exception("job crashed", extra={"job": job_id})
            await self._finish(job_id, live, "failed", error=f"internal error: {type(e).__name__}: {e}")
        finally:
            self._live.pop(job_id, None)
            self._release(live.owner)
            for queue in live.subscribers:
                queue.put_nowait(None)
            live.subscribers.clear()


def build_job_service(settings: ApiSettings, driver: Driver, database: str) -> JobService:
    """The job service the API settings describe, over the graph in `database`."""

    def knowledge() -> KnowledgeSource:
        from search.embeddings import shared_embedder
        from search.retrieval import GraphKnowledge

        return GraphKnowledge(Neo4jGraphStore(driver, database), shared_embedder())

    def improvements(job_id: str) -> ImprovementSink:
        from search.embeddings import shared_embedder

        return GraphImprovements(Neo4jGraphStore(driver, database), shared_embedder().embed_code, job_id)

    return JobService(
        JobStore(driver, database, keep_events=settings.job_events_kept),
        knowledge=knowledge,
        generator=settings.models.generator,
        executor_url=settings.executor_url,
        tasks_dir=settings.tasks_dir,
        max_concurrent=settings.max_concurrent_jobs,
        max_jobs_per_owner=settings.max_jobs_per_key,
        retry_after_s=settings.jobs_retry_after_s,
        executor_timeout_s=settings.executor_timeout_s,
        improvements=improvements if settings.offer_improvements_to_graph else None,
    )
