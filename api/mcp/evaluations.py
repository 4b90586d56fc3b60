"""Evaluations as jobs of the MCP server: one call starts it, others follow, read or cancel it.

An evaluation on a GPU can outlast a client's tool-call timeout, so besides ``evaluate_candidate``
(which waits) an agent may ``start_evaluation`` and come back. The jobs live in the server's process
(they are not in the graph: an evaluation is one executor request, nothing to resume after a restart),
belong to the caller's key like optimization jobs (`Caller.job_owner`; another key's evaluation is
unknown to it, admins see all), and the newest `KEEP` finished ones are kept.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from api.errors import ServiceError, ServiceErrorKind
from api.mcp.service import ProgressReporter

logger = logging.getLogger(__name__)

EvaluationState = Literal["running", "succeeded", "failed", "cancelled"]

MAX_RUNNING = 4
"""Evaluations one server runs at once (each holds an executor request)."""
KEEP = 200
"""Finished evaluations kept for their owners to read."""


@dataclass
class EvaluationJob:
    """One evaluation: its state, what it reported so far and, once finished, its verdict."""

    id: str
    owner: str
    task_id: str
    state: EvaluationState = "running"
    progress: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        """Whether it has ended (passed or not, failed to run, or cancelled)."""
        return self.state != "running"

    def public(self) -> dict[str, Any]:
        """What the status tool answers."""
        return {
            "evaluation_id": self.id,
            "task_id": self.task_id,
            "state": self.state,
            "finished": self.finished,
            "progress": list(self.progress),
            "error": self.error,
            "result": self.result,
        }

    def _note(self, line: str) -> None:
        self.progress.append(line)
        self.changed.set()


Evaluate = Callable[[ProgressReporter], Awaitable[dict[str, Any]]]


class EvaluationJobs:
    """The evaluations of one MCP server (one per API process, one per ``regraph mcp``)."""

    def __init__(self, *, max_running: int = MAX_RUNNING, keep: int = KEEP) -> None:
        """Run at most `max_running` at once; keep the newest `keep` finished ones."""
        self.max_running = max_running
        self.keep = keep
        self._jobs: OrderedDict[str, EvaluationJob] = OrderedDict()

    def start(self, owner: str, task_id: str, evaluate: Evaluate) -> EvaluationJob:
        """Start `evaluate` in the background for `owner`; returns the job at once."""
        running = sum(not j.finished for j in self._jobs.values())
        if running >= self.max_running:
            raise ServiceError(
                f"{running} evaluations are running on this server (at most {self.max_running}); "
                "wait for one (evaluation_status) or cancel one",
                kind=ServiceErrorKind.UNAVAILABLE,
            )
        job = EvaluationJob(id=f"eval-{uuid.uuid4().hex[:16]}", owner=owner, task_id=task_id)

        async def report(progress: float, total: float | None, message: str) -> None:
            job._note(message)

        async def run() -> None:
            try:
                job.result = await evaluate(ProgressReporter(report))
                job.state = "succeeded"
            except asyncio.CancelledError:
                job.state, job.error = "cancelled", "cancelled by a request"
            except ServiceError as e:
                job.state, job.error = "failed", str(e)
            except Exception as e:  # a background job must end in a state its owner can read
                logger.exception("evaluation %s failed", job.id)
                job.state, job.error = "failed", f"the evaluation failed: {e}"
            finally:
                job.changed.set()
                self._forget_old()

        job.task = asyncio.get_running_loop().create_task(run(), name=job.id)
        self._jobs[job.id] = job
        return job

    def _forget_old(self) -> None:
        finished = [j.id for j in self._jobs.values() if j.finished]
        for job_id in finished[: max(0, len(finished) - self.keep)]:
            del self._jobs[job_id]

    def get(self, evaluation_id: str, scope: str | None) -> EvaluationJob:
        """The evaluation, if `scope` may see it (None: anyone's); else "not found"."""
        job = self._jobs.get(evaluation_id)
        if job is None or (scope is not None and job.owner != scope):
            raise ServiceError(f"evaluation {evaluation_id!r} not found", kind=ServiceErrorKind.NOT_FOUND)
        return job

    async def cancel(self, evaluation_id: str, scope: str | None) -> EvaluationJob:
        """Cancel a running evaluation and wait until it has ended, its executor request closed (the
        executor may still finish the work; its verdict goes nowhere)."""
        job = self.get(evaluation_id, scope)
        if job.finished:
            raise ServiceError(
                f"evaluation {evaluation_id!r} has already finished ({job.state})",
                kind=ServiceErrorKind.CONFLICT,
            )
        assert job.task is not None
        job.task.cancel()
        await asyncio.wait({job.task})
        return job

    async def close(self) -> None:
        """Cancel every running evaluation and wait for each to end (at the server's shut-down): each
        closes its executor request, so this returns without waiting for the executor."""
        tasks = [j.task for j in self._jobs.values() if not j.finished and j.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def follow(self, job: EvaluationJob, wait_s: float, progress: ProgressReporter) -> None:
        """Report `job`'s progress lines as they come, until it finishes or `wait_s` has passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        sent = 0
        while True:
            for line in job.progress[sent:]:
                sent += 1
                await progress.report(sent, None, line)
            left = deadline - loop.time()
            if job.finished or left <= 0:
                return
            job.changed.clear()
            if len(job.progress) > sent or job.finished:
                continue
            try:
                await asyncio.wait_for(job.changed.wait(), timeout=left)
            except TimeoutError:
                return
