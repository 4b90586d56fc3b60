"""The examples' pages of the curation workspace: the review queue, an example's page, its review and
split, the review of several examples at once, the backlog, and a transition's page with its examples."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from api.auth import Caller
from api.deps import ExampleServiceDep, StateDep, TechniqueServiceDep
from api.examples.models import ExamplePublic, ReviewRequest, SplitRequest
from api.examples.service import ExampleService
from api.graph.errors import GraphServiceError
from api.techniques.models import TransitionPublic
from api.techniques.service import TechniqueService
from api.ui.render import side_by_side
from api.ui.visitor import (
    PAGE,
    SERVICE_ERRORS,
    Visit,
    VisitDep,
    WriteDep,
    confirm,
    in_thread,
    live_session,
    problem,
    see,
    signed_in,
)
from graphdb.models import ExampleSummary, ReviewQueueFilter, ReviewQueuePage, ReviewStatus, Role

logger = logging.getLogger(__name__)

QUEUE_LIMIT = 1000  # pending examples read for the review queue (filters apply to these)
BULK_LIMIT = 200  # examples one bulk review may name

router = APIRouter(prefix="/ui", include_in_schema=False)


# -- the review queue -------------------------------------------------------------------------------


def _queue_filter(params: dict[str, str]) -> tuple[ReviewQueueFilter, str]:
    """The filter of the queue's parameters, and an error message for a bad one (then ignored)."""
    try:
        min_speedup = float(params["min_speedup"]) if params.get("min_speedup") else None
        error = ""
    except ValueError:
        min_speedup = None
        error = f"min speedup {params['min_speedup']!r} is not a number"
    only = ReviewQueueFilter(
        technique=params["technique"] or None,
        transition=params["transition"] or None,
        task=params["task"] or None,
        device=params["device"] or None,
        min_speedup=min_speedup,
    )
    return only, error


def _queue_context(
    visit: Visit,
    service: ExampleService,
    techniques: TechniqueService,
    params: dict[str, str],
    only: ReviewQueueFilter,
    selected: str | None,
    page: ReviewQueuePage,
) -> dict[str, Any]:
    pending = page.pending
    shown = [e for e in pending if only.keeps(e)]
    current = next((e for e in shown if e.id == selected), shown[0] if shown else None)
    index = shown.index(current) if current is not None else -1
    return {
        "params": params,
        "back": urlencode({k: v for k, v in params.items() if v}),
        "examples": shown,
        "total_pending": len(pending),
        "capped": len(pending) >= QUEUE_LIMIT,
        "facets": {
            "technique": sorted({n for e in pending for n in (e.source, e.target)}),
            "transition": sorted({f"{e.source} -> {e.target}" for e in pending}),
            "task": sorted({e.task_id for e in pending}),
            "device": sorted({e.device for e in pending if e.device}),
        },
        "current": current,
        "prev_id": shown[index - 1].id if index > 0 else None,
        "next_id": shown[index + 1].id if 0 <= index < len(shown) - 1 else None,
        "detail": _shown_detail(visit, service, techniques, current, page),
    }


def _shown_detail(
    visit: Visit,
    service: ExampleService,
    techniques: TechniqueService,
    current: ExampleSummary | None,
    page: ReviewQueuePage,
) -> dict[str, Any] | None:
    if current is None:
        return None
    if page.example is None or page.example.id != current.id:
        # The page query and `ReviewQueueFilter.keeps` chose differently: a bug, but the page still
        # shows the example the list says is current (read on its own).
        logger.warning("review queue: the page query showed another example than the list's current")
        with visit.reported():
            return _example_context(techniques, service.get_example(current.id), page.pending)
        return None
    transition = TransitionPublic.of(page.transition) if page.transition is not None else None
    return _example_detail(ExamplePublic.of(page.example), page.pending, transition, page.technique_names)


def _example_context(
    techniques: TechniqueService, example: ExamplePublic, nearby: Sequence[ExamplePublic | ExampleSummary]
) -> dict[str, Any]:
    """An example's detail with its transition and the technique names read separately."""
    try:
        transition: TransitionPublic | None = techniques.list_transitions(
            source=example.source, target=example.target, limit=1, offset=0
        ).items[0]
    except GraphServiceError:
        transition = None
    return _example_detail(example, nearby, transition, techniques.technique_names())


def _example_detail(
    example: ExamplePublic,
    nearby: Sequence[ExamplePublic | ExampleSummary],
    transition: TransitionPublic | None,
    technique_names: list[str],
) -> dict[str, Any]:
    # The example's trajectory, as far as its steps are in view: its place on the technique path.
    steps = sorted(
        (e for e in nearby if example.trajectory_id and e.trajectory_id == example.trajectory_id),
        key=lambda e: e.step_index if e.step_index is not None else -1,
    )
    return {
        "example": example,
        "rows": side_by_side(example.code_before, example.code_after),
        "transition": transition,
        "steps": steps,
        "techniques": technique_names,
    }


@router.get("/queue")
async def queue(
    request: Request,
    state: StateDep,
    service: ExampleServiceDep,
    techniques: TechniqueServiceDep,
    technique: str = "",
    transition: str = "",
    task: str = "",
    device: str = "",
    min_speedup: str = "",
    selected: str | None = None,
) -> HTMLResponse:
    # Not a `VisitDep`: the key is checked in the page's own query (one round trip, not two).
    session, target = live_session(request)
    params = {
        "technique": technique,
        "transition": transition,
        "task": task,
        "device": device,
        "min_speedup": min_speedup,
    }
    only, error = _queue_filter(params)
    with signed_in(request, session, target):
        page = await in_thread(
            lambda: service.review_queue_page(session.token, limit=QUEUE_LIMIT, selected=selected, only=only)
        )
    caller = Caller(name=page.key.name, role=page.key.role, key_id=page.key.id)
    visit = Visit(request, session, caller, state.settings)
    if error:
        visit.flash("error", error)
    context = await in_thread(
        lambda: _queue_context(visit, service, techniques, params, only, selected, page)
    )
    return visit.render("queue.html", nav="queue", **context)


# -- an example: its page, its review, its split ------------------------------------------------------


@router.get("/examples/{example_id}")
async def example_page(
    visit: VisitDep, service: ExampleServiceDep, techniques: TechniqueServiceDep, example_id: str
) -> Response:
    def load() -> dict[str, Any] | None:
        with visit.reported():
            example = service.get_example(example_id)
            return _example_context(techniques, example, [])
        return None

    detail = await in_thread(load)
    if detail is None:
        return see("/ui/queue")
    return visit.render("example.html", nav="queue", detail=detail, back="")


def _after_review(visit: Visit, next_id: str) -> RedirectResponse:
    back = visit.field("back")
    query = back + (f"&selected={next_id}" if next_id else "")
    return see(f"/ui/queue?{query.lstrip('&')}" if query else "/ui/queue")


@router.post("/examples/{example_id}/review")
async def review(visit: WriteDep, service: ExampleServiceDep, example_id: str) -> Response:
    visit.require(Role.CURATOR)
    decision, reason = visit.field("decision"), visit.field("reason")
    if decision not in ("approve", "reject"):
        visit.flash("error", "choose approve or reject")
    elif decision == "reject" and not reason:
        visit.flash("error", "a rejection needs a reason")
        return _after_review(visit, example_id)
    elif decision == "reject" and (
        asked := confirm(
            visit,
            "Reject",
            f"Reject example {example_id[:12]} ({reason!r}): it leaves retrieval and its transition's "
            "statistics (1 example).",
            f"/ui/queue?selected={example_id}",
        )
    ):
        return asked
    else:
        body = ReviewRequest(decision=decision, reason=reason)
        with visit.reported(
            f"{'Approved' if decision == 'approve' else 'Rejected'} example {example_id[:12]}."
        ):
            await in_thread(lambda: service.review_example(example_id, body, actor=visit.caller.name))
    return _after_review(visit, visit.field("next_id"))


@router.post("/examples/{example_id}/split")
async def split(visit: WriteDep, service: ExampleServiceDep, example_id: str) -> RedirectResponse:
    visit.require(Role.CURATOR)
    target, source = visit.field("target"), visit.field("source")
    try:
        body = SplitRequest(target=target, source=source or None)
    except ValidationError:
        visit.flash("error", "name the technique to split the example onto")
        return _after_review(visit, example_id)
    with visit.reported(f"Moved example {example_id[:12]} onto {body.source or 'its source'} -> {target}."):
        await in_thread(lambda: service.split_example(example_id, body, actor=visit.caller.name))
    return _after_review(visit, visit.field("next_id"))


# -- several examples at once: a bulk review, and the backlog ---------------------------------------


def _review_each(
    visit: Visit, service: ExampleService, ids: list[str], body: ReviewRequest
) -> tuple[int, list[str]]:
    """Review each example on its own (one audit entry each): how many were, and what refused the others."""
    done, refused = 0, []
    for example_id in ids:
        try:
            service.review_example(example_id, body, actor=visit.caller.name)
            done += 1
        except SERVICE_ERRORS as e:
            refused.append(f"{example_id[:12]}: {problem(e).message}")
    return done, refused


def _bulk_refusal(ids: list[str], decision: str, reason: str) -> str:
    """What is wrong with a bulk review's form ("" when nothing is)."""
    if not ids:
        return "select the examples to review first"
    if len(ids) > BULK_LIMIT:
        return f"a bulk review takes at most {BULK_LIMIT} examples, not {len(ids)}"
    if decision not in ("approve", "reject"):
        return "choose approve or reject"
    if decision == "reject" and not reason:
        return "a rejection needs a reason"
    return ""


@router.post("/queue/review")
async def bulk_review(visit: WriteDep, service: ExampleServiceDep) -> Response:
    """Approve or reject the examples checked in the queue, after one confirmation."""
    visit.require(Role.CURATOR)
    ids, decision, reason = visit.fields("ids"), visit.field("decision"), visit.field("reason")
    back = visit.field("back")
    queue_url = f"/ui/queue?{back}" if back else "/ui/queue"
    wrong = _bulk_refusal(ids, decision, reason)
    if wrong:
        visit.flash("error", wrong)
        return see(queue_url)
    what = (
        f"Approve {len(ids)} example(s): they count in their transitions' statistics and retrieval."
        if decision == "approve"
        else f"Reject {len(ids)} example(s) ({reason!r}): they leave retrieval and their transitions' "
        "statistics."
    )
    asked = confirm(visit, "Approve" if decision == "approve" else "Reject", what, queue_url)
    if asked is not None:
        return asked
    body = ReviewRequest(decision=decision, reason=reason)
    done, refused = await in_thread(lambda: _review_each(visit, service, ids, body))
    visit.flash("ok", f"{'Approved' if decision == 'approve' else 'Rejected'} {done} example(s).")
    if refused:
        visit.flash("error", f"{len(refused)} not reviewed: " + "; ".join(refused))
    return see(queue_url)


@dataclass
class Waiting:
    """A group of pending examples (one transition, technique or task): how many, since when."""

    name: str
    query: str  # the review queue's filter that shows them
    count: int = 0
    oldest: datetime | None = None

    def add(self, created_at: datetime) -> None:
        self.count += 1
        self.oldest = created_at if self.oldest is None else min(self.oldest, created_at)


def _backlog(service: ExampleService) -> dict[str, Any]:
    """The pending examples (the oldest `QUEUE_LIMIT`, as the queue reads them) counted by transition,
    technique (either end) and task, each group oldest first."""
    pending: list[ExamplePublic] = []
    while len(pending) < QUEUE_LIMIT:
        page = service.list_examples(
            source=None, target=None, status=ReviewStatus.PENDING, limit=PAGE, offset=len(pending)
        ).items
        pending.extend(page[: QUEUE_LIMIT - len(pending)])
        if len(page) < PAGE:
            break
    groups: dict[str, dict[str, Waiting]] = {"transition": {}, "technique": {}, "task": {}}
    for e in pending:
        keys = {
            "transition": [f"{e.source} -> {e.target}"],
            "technique": sorted({e.source, e.target}),
            "task": [e.task_id],
        }
        for kind, names in keys.items():
            for name in names:
                group = groups[kind].setdefault(name, Waiting(name, urlencode({kind: name})))
                group.add(e.created_at)
    now = datetime.now(UTC)
    return {
        "total": len(pending),
        "capped": len(pending) >= QUEUE_LIMIT,
        "now": now,
        "groups": {
            kind: sorted(found.values(), key=lambda g: (g.oldest or now, -g.count, g.name))
            for kind, found in groups.items()
        },
    }


@router.get("/backlog")
async def backlog(visit: VisitDep, service: ExampleServiceDep) -> HTMLResponse:
    """How many examples wait for review per transition, technique and task, the longest waiting first."""
    return visit.render("backlog.html", nav="queue", **await in_thread(lambda: _backlog(service)))


# -- a transition and its examples --------------------------------------------------------------------


@router.get("/transition")
async def transition(
    visit: VisitDep, service: ExampleServiceDep, techniques: TechniqueServiceDep, source: str, target: str
) -> Response:
    def load() -> dict[str, Any] | None:
        with visit.reported():
            found = techniques.list_transitions(source=source, target=target, limit=1, offset=0).items[0]
            examples = service.list_examples(
                source=source, target=target, status=None, limit=200, offset=0
            ).items
            return {"transition": found, "examples": examples}
        return None

    context = await in_thread(load)
    if context is None:
        return see("/ui/graph")
    return visit.render("transition.html", nav="graph", **context)
