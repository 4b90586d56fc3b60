"""The optimization jobs' pages of the curation workspace: the list and a new job, a job's page, its
live events (server-sent) and its cancel."""

from __future__ import annotations

import logging
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from api.deps import JobsDep
from api.optimize.errors import OptimizeError
from api.optimize.models import JobPublic, OptimizeCreate
from api.ui.visitor import VisitDep, WriteDep, event_stream_response, problem, see
from search.baselines import METHODS

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/ui", include_in_schema=False)


SETTLED_NS = 2_000_000_000
"""How old a directory's mtime must be for a listing to be kept: file times tick coarsely (a few ms), so
a change within the same tick as the listing would leave the mtime as it was (git's "racy" entries)."""
_KEPT_LISTINGS = 8  # task directories whose listing is kept (one per app's settings, in practice)


@dataclass(frozen=True)
class _Listing:
    mtime_ns: int  # the directory's, read before it was listed
    settled: bool  # whether that mtime was old enough to trust for the next request
    ids: tuple[str, ...]
    unfinished: tuple[Path, ...]  # entries without a task.json yet (a task being copied in)


_listings: dict[Path, _Listing] = {}


def task_ids(tasks_dir: Path | None) -> list[str]:
    """The task library's task ids, sorted (the new job form's choices).

    The directory is listed again only when it changed (a task added, removed or renamed changes its
    mtime) or an entry that had no task.json has one now: a task copied into the library shows on the
    next page without a restart, and a page otherwise costs one `stat`, not a listing.
    """
    if tasks_dir is None:
        return []
    try:
        status = tasks_dir.stat()
    except OSError:
        return []
    if not stat.S_ISDIR(status.st_mode):
        return []
    known = _listings.get(tasks_dir)
    if (
        known is not None
        and known.settled
        and known.mtime_ns == status.st_mtime_ns
        and not any((p / "task.json").is_file() for p in known.unfinished)
    ):
        return list(known.ids)
    ids: list[str] = []
    unfinished: list[Path] = []
    for entry in tasks_dir.iterdir():
        if (entry / "task.json").is_file():
            ids.append(entry.name)
        elif entry.is_dir():
            unfinished.append(entry)
    settled = time.time_ns() - status.st_mtime_ns > SETTLED_NS
    _listings.pop(tasks_dir, None)
    _listings[tasks_dir] = _Listing(status.st_mtime_ns, settled, tuple(sorted(ids)), tuple(unfinished))
    while len(_listings) > _KEPT_LISTINGS:
        _listings.pop(next(iter(_listings)))
    return sorted(ids)


@router.get("/jobs")
async def jobs_page(visit: VisitDep, jobs: JobsDep) -> HTMLResponse:
    records = await jobs.list_jobs(limit=50, owner=visit.caller.job_scope)
    return visit.render(
        "jobs.html",
        nav="jobs",
        jobs=[JobPublic.of(r) for r in records],
        tasks=task_ids(visit.settings.tasks_dir),
        methods=METHODS,
    )


@router.post("/jobs")
async def start_job(visit: WriteDep, jobs: JobsDep) -> RedirectResponse:
    # Like POST /v1/optimize: any signed-in key may run a job (it changes nothing in the graph).
    fields = {"task_ref": visit.field("task"), "method": visit.field("method") or "regraph-mcgs"}
    numbers = {k: visit.field(k) for k in ("budget", "rollouts", "seed") if visit.field(k)}
    try:
        body = OptimizeCreate.model_validate({**fields, **{k: int(v) for k, v in numbers.items()}})
    except (ValueError, ValidationError) as e:
        visit.flash("error", f"the job request is not valid: {e}")
        return see("/ui/jobs")
    with visit.reported():
        record = await jobs.submit(body, owner=visit.caller.job_owner)
        logger.info("ui job started", extra={"actor": visit.caller.name, "job": record.id})
        return see(f"/ui/jobs/{record.id}")
    return see("/ui/jobs")


@router.get("/jobs/{job_id}")
async def job_page(visit: VisitDep, jobs: JobsDep, job_id: str) -> Response:
    with visit.reported():
        job = JobPublic.of(await jobs.get(job_id, owner=visit.caller.job_scope))
        budget = int(job.request.get("budget", 20))
        return visit.render("job.html", nav="jobs", job=job, budget=budget)
    return see("/ui/jobs")


@router.get("/jobs/{job_id}/events")
async def job_events(
    visit: VisitDep, jobs: JobsDep, job_id: str, after: Annotated[int, Query(ge=-1)] = -1
) -> Response:
    try:
        await jobs.get(job_id, owner=visit.caller.job_scope)
        return await event_stream_response(jobs, job_id, after)
    except OptimizeError as e:
        api = problem(e)
        return Response(api.message, status_code=api.status_code, media_type="text/plain")


@router.post("/jobs/{job_id}/cancel")
async def cancel_job(visit: WriteDep, jobs: JobsDep, job_id: str) -> RedirectResponse:
    with visit.reported("Cancelled."):
        await jobs.cancel(job_id, owner=visit.caller.job_scope)
    return see(f"/ui/jobs/{job_id}")
