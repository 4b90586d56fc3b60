"""Optimization jobs persisted in Neo4j, so that a job outlives the process that ran it.

A `Job` node holds its owner (the submitting API key's id: the API shows a job, its submitted source
and its events only to its owner and to admins), the job's state (queued, running, succeeded, failed, cancelled), the request and
the result (as JSON text: this package does not know the API's wire models), an error message and
timestamps. Its progress events are `JobEvent` nodes (``job_id``, ``seq``), of which the newest
`keep` are kept. A job is never lost silently: at start-up, jobs a previous process left queued or
running are marked failed by `fail_unfinished` with the reason given.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

from neo4j import Driver
from neo4j.exceptions import DriverError, Neo4jError
from neo4j.time import DateTime as Neo4jDateTime
from pydantic import BaseModel, ConfigDict, Field

from graphdb import job_queries as q
from graphdb.errors import JobNotFoundError, JobStateError, JobStoreError

logger = logging.getLogger(__name__)

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
DEFAULT_EVENTS_KEPT = 2000


class JobRecord(BaseModel):
    """A job as stored."""

    model_config = ConfigDict(frozen=True)

    id: str
    state: JobState
    method: str
    task_id: str
    request: dict[str, Any]
    result: dict[str, Any] | None = None
    error: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime
    event_count: int = Field(0, ge=0, description="events appended so far (older ones may be dropped)")
    owner: str | None = Field(
        None,
        description="who submitted it: an API key's id, or 'anonymous'; None for jobs from before owners",
    )

    @property
    def finished(self) -> bool:
        """Whether the job reached a final state."""
        return self.state in FINAL_STATES


class JobEventRecord(BaseModel):
    """One stored progress event of a job."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    seq: int = Field(ge=0)
    kind: str
    payload: dict[str, Any]
    at: datetime


def _now() -> datetime:
    return datetime.now(UTC)


def _native(value: Any) -> Any:
    return value.to_native() if isinstance(value, Neo4jDateTime) else value


def _job(row: dict[str, Any]) -> JobRecord:
    values = {k: _native(v) for k, v in row.items()}
    values["request"] = json.loads(values["request"])
    values["result"] = json.loads(values["result"]) if values.get("result") is not None else None
    return JobRecord.model_validate(values)


class JobStore:
    """Jobs and their events in one Neo4j database."""

    def __init__(
        self, driver: Driver, database: str = "neo4j", *, keep_events: int = DEFAULT_EVENTS_KEPT
    ) -> None:
        """Store jobs through `driver`; each job keeps its newest `keep_events` events."""
        self._driver = driver
        self._database = database
        self.keep_events = keep_events

    def _query(self, query: str, **params: Any) -> list[dict[str, Any]]:
        try:
            records, _, _ = self._driver.execute_query(query, params, database_=self._database)
        except Neo4jError as e:
            raise JobStoreError(f"the job store query failed: {e}") from e
        except (DriverError, OSError) as e:
            raise JobStoreError(f"Neo4j is unreachable: {e}") from e
        return [r.data() for r in records]

    def create(
        self, job_id: str, *, method: str, task_id: str, request: dict[str, Any], owner: str | None = None
    ) -> JobRecord:
        """Record a new job in state ``queued``, belonging to `owner` (a key id)."""
        rows = self._query(
            q.CREATE_JOB,
            id=job_id,
            method=method,
            task_id=task_id,
            request=json.dumps(request),
            now=_now(),
            owner=owner,
        )
        return _job(rows[0]["job"])

    def get(self, job_id: str) -> JobRecord:
        """The job with this id; raises `JobNotFoundError`."""
        rows = self._query(q.GET_JOB, id=job_id)
        if not rows:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        return _job(rows[0]["job"])

    def list_jobs(
        self, *, state: JobState | None = None, limit: int = 50, offset: int = 0, owner: str | None = None
    ) -> list[JobRecord]:
        """Jobs, newest first, optionally only those in `state` and only those of `owner`."""
        rows = self._query(q.LIST_JOBS, state=state, limit=limit, offset=offset, owner=owner)
        return [_job(r["job"]) for r in rows]

    def _changed(self, job_id: str, rows: list[dict[str, Any]], change: str) -> JobRecord:
        if rows:
            return _job(rows[0]["job"])
        current = self.get(job_id)  # raises JobNotFoundError for an unknown id
        raise JobStateError(f"job {job_id} is {current.state}; it cannot be {change}")

    def mark_running(self, job_id: str) -> JobRecord:
        """queued -> running."""
        return self._changed(job_id, self._query(q.START_JOB, id=job_id, now=_now()), "started")

    def finish(
        self,
        job_id: str,
        state: Literal["succeeded", "failed", "cancelled"],
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> JobRecord:
        """queued or running -> a final state, with the result or the reason."""
        rows = self._query(
            q.FINISH_JOB,
            id=job_id,
            state=state,
            result=json.dumps(result) if result is not None else None,
            error=error,
            now=_now(),
        )
        return self._changed(job_id, rows, state)

    def fail_unfinished(self, reason: str) -> list[str]:
        """Mark every queued or running job failed with `reason`; returns their ids.

        Called when a process starts (or stops): such jobs have nobody running them any more.
        """
        ids = [str(r["id"]) for r in self._query(q.FAIL_UNFINISHED, reason=reason, now=_now())]
        if ids:
            logger.warning("marked unfinished jobs failed", extra={"jobs": ",".join(ids), "reason": reason})
        return ids

    def append_event(self, event: JobEventRecord) -> None:
        """Store one event of a job (dropping those older than the job's newest `keep_events`)."""
        rows = self._query(
            q.APPEND_EVENT,
            job_id=event.job_id,
            seq=event.seq,
            kind=event.kind,
            payload=json.dumps(event.payload),
            now=event.at,
            keep=self.keep_events,
        )
        if not rows:
            raise JobNotFoundError(f"no job has id {event.job_id!r}")

    def events(self, job_id: str, *, after: int = -1) -> list[JobEventRecord]:
        """The job's stored events with ``seq > after``, in order."""
        rows = self._query(q.LIST_EVENTS, job_id=job_id, after=after)
        return [
            JobEventRecord(
                job_id=job_id,
                seq=r["seq"],
                kind=r["kind"],
                payload=json.loads(r["payload"]),
                at=_native(r["at"]),
            )
            for r in rows
        ]
