"""``/v1/optimize`` and ``/v1/jobs``: start an optimization job, read it, follow it live, cancel it.

Thin: routes call `JobService` and let its `OptimizeError`s (`ServiceError`s) through to the app-wide
error handler. Only the event stream (`api.optimize.stream`), whose response has already begun, reports
an error inside the stream.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Response, status
from fastapi.responses import StreamingResponse

from api.auth import RequireReader, require_reader
from api.deps import JobsDep
from api.errors import responses
from api.optimize.models import JobAccepted, JobEventPublic, JobList, JobPublic, OptimizeCreate
from api.optimize.stream import event_stream_response

# Any valid key may run and read optimizations (or anyone, with REGRAPH_ANONYMOUS_READ on): a job
# spends executor and model time but never changes the graph except through curator review.
router = APIRouter(prefix="/v1", tags=["optimize"], dependencies=[Depends(require_reader)])

MAX_OFFSET = 10_000_000
MAX_EVENT_SEQ = 2**31


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
