"""``/v1/optimize`` and ``/v1/jobs``: start an optimization job, read it, follow it live, cancel it.

Thin: routes call `JobService` and let its `OptimizeError`s through; one app exception handler
(`api.errors.translate_errors` with `api_error`) answers them in the error envelope. Only the event stream, whose response
has already begun, reports an error inside the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Response, status
from fastapi.responses import StreamingResponse

from api.auth import RequireReader, require_reader
from api.deps import StateDep
from api.errors import (
    ApiError,
    ConflictError,
    NotFoundError,
    ServiceUnavailableError,
    responses,
)
from api.optimize.protocol import (
    JobAccepted,
    JobEventPublic,
    JobList,
    JobPublic,
    OptimizeCreate,
)
from api.optimize.service import (
    Heartbeat,
    InvalidTaskError,
    JobAlreadyFinishedError,
    JobService,
    JobStorageError,
    JobUnknownError,
    NotConfiguredError,
    OptimizeError,
    TaskNotFoundError,
    TooManyJobsError,
    follow,
)

# Any valid key may run and read optimizations (or anyone, with REGRAPH_ANONYMOUS_READ on): a job
# spends executor and model time but never changes the graph except through curator review.
router = APIRouter(prefix="/v1", tags=["optimize"], dependencies=[Depends(require_reader)])


class NotConfiguredApiError(ServiceUnavailableError):
    """A setting the request needs is missing (the message names it)."""

    error_type = "not_configured"


class InvalidTaskApiError(ApiError):
    """The task or program in the request cannot be optimized."""

    status_code = 422
    error_type = "invalid_task"


class TooManyJobsApiError(ApiError):
    """The key already has as many jobs queued or running as it may (REGRAPH_MAX_JOBS_PER_KEY)."""

    status_code = 429
    error_type = "rate_limited"


def get_jobs(state: StateDep) -> JobService:
    """The running job service."""
    if state.jobs is None:
        raise ServiceUnavailableError("the job service is starting or stopping")
    return state.jobs


JobsDep = Annotated[JobService, Depends(get_jobs)]

MAX_OFFSET = 10_000_000
MAX_EVENT_SEQ = 2**31


def api_error(error: OptimizeError) -> ApiError:
    """The HTTP error for an optimize service error."""
    if isinstance(error, NotConfiguredError):
        return NotConfiguredApiError(str(error))
    if isinstance(error, InvalidTaskError):
        return InvalidTaskApiError(str(error))
    if isinstance(error, TaskNotFoundError | JobUnknownError):
        return NotFoundError(str(error))
    if isinstance(error, JobAlreadyFinishedError):
        return ConflictError(str(error))
    if isinstance(error, JobStorageError):
        return ServiceUnavailableError(str(error))
    if isinstance(error, TooManyJobsError):
        return TooManyJobsApiError(str(error), headers={"Retry-After": str(error.retry_after_s)})
    return ApiError(str(error))


@router.post(
    "/optimize",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Start optimizing a program for a task; follow the job at events_url",
    description="A key may have `REGRAPH_MAX_JOBS_PER_KEY` jobs queued or running at once; past that the "
    "answer is 429 with a Retry-After header (cancel a job or wait for one to end).",
    responses=responses(404, 413, 429),
)
async def create_job(
    body: OptimizeCreate, jobs: JobsDep, response: Response, caller: RequireReader
) -> JobAccepted:
    record = await jobs.submit(body, owner=caller.job_owner)
    response.headers["Location"] = f"/v1/jobs/{record.id}"
    return JobAccepted(
        id=record.id,
        state=record.state,
        job_url=f"/v1/jobs/{record.id}",
        events_url=f"/v1/jobs/{record.id}/events",
    )


@router.get(
    "/jobs", summary="Jobs, newest first: the caller's own (admins: everyone's)", responses=responses()
)
async def list_jobs(
    jobs: JobsDep,
    caller: RequireReader,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> JobList:
    records = await jobs.list_jobs(limit=limit, offset=offset, owner=caller.job_scope)
    return JobList(jobs=[JobPublic.of(r) for r in records])


@router.get(
    "/jobs/{job_id}", summary="A job: state, request and, once finished, its result", responses=responses(404)
)
async def get_job(job_id: str, jobs: JobsDep, caller: RequireReader) -> JobPublic:
    return JobPublic.of(await jobs.get(job_id, owner=caller.job_scope))


@router.delete("/jobs/{job_id}", summary="Cancel a queued or running job", responses=responses(404, 409))
async def cancel_job(job_id: str, jobs: JobsDep, caller: RequireReader) -> JobPublic:
    return JobPublic.of(await jobs.cancel(job_id, owner=caller.job_scope))


def _sse(event: str, data: str, event_id: int | None = None) -> str:
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in data.splitlines() or [""])
    return "\n".join(lines) + "\n\n"


@router.get(
    "/jobs/{job_id}/events",
    summary="Server-sent events: the job's past events, then live ones; ends with `event: end`",
    response_class=StreamingResponse,
    responses={
        **responses(404),
        200: {"content": {"text/event-stream": {}}, "description": JobEventPublic.__doc__},
    },
)
async def job_events(
    job_id: str,
    jobs: JobsDep,
    caller: RequireReader,
    after: Annotated[int, Query(ge=-1, le=MAX_EVENT_SEQ, description="only events with a larger seq")] = -1,
    last_event_id: Annotated[
        str | None, Header(description="set by reconnecting EventSource clients")
    ] = None,
) -> StreamingResponse:
    if last_event_id is not None and last_event_id.strip().isdigit():
        after = max(after, min(int(last_event_id), MAX_EVENT_SEQ))
    await jobs.get(job_id, owner=caller.job_scope)
    return await event_stream_response(jobs, job_id, after)


async def event_stream_response(jobs: JobService, job_id: str, after: int) -> StreamingResponse:
    """The job's events with ``seq > after`` as server-sent events (also served to the /ui pages)."""
    subscription = await jobs.subscribe(job_id, after=after)

    async def stream() -> AsyncIterator[str]:
        async for item in follow(subscription):
            if isinstance(item, Heartbeat):
                yield ": keep-alive\n\n"
            else:
                yield _sse(item.kind, item.model_dump_json(), item.seq)
        try:
            final = JobPublic.of(await jobs.get(job_id))
        except OptimizeError as e:
            # The response has begun: the error goes into the stream, not into a status code.
            yield _sse("error", api_error(e).message)
            return
        yield _sse("end", final.model_dump_json())

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
