"""A job's events as server-sent events: the stream /v1/jobs/{id}/events and the /ui job page follow."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse

from api.optimize.errors import OptimizeError
from api.optimize.events import Heartbeat, follow
from api.optimize.models import JobPublic
from api.optimize.service import JobService


def _sse(event: str, data: str, event_id: int | None = None) -> str:
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in data.splitlines() or [""])
    return "\n".join(lines) + "\n\n"


async def event_stream_response(jobs: JobService, job_id: str, after: int) -> StreamingResponse:
    """The job's events with ``seq > after`` as server-sent events; ends with ``event: end``."""
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
            yield _sse("error", e.message)
            return
        yield _sse("end", final.model_dump_json())

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
