"""The relabel pages of the curation workspace: the relabel decisions and their undo, the relabel queue
(accept a queued name or merge it into a technique), and the likely duplicate techniques (merge a pair,
keep it separate, or list it again)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from api.deps import AuditServiceDep, RelabelServiceDep, TechniqueServiceDep
from api.relabel.models import (
    DuplicateList,
    DuplicateMerge,
    KeptSeparateList,
    PairReview,
    QueueList,
    QueueMerge,
)
from api.ui.visitor import (
    PAGE,
    UNDO_NOTE,
    Visit,
    VisitDep,
    WriteDep,
    confirm,
    in_thread,
    see,
    what_moves,
)
from graphdb.models import RelabelOutcome, Role
from search.protocols import INITIAL_TECHNIQUE

QUEUED_SHOWN = 200  # relabel decisions shown on the relabel queue page, the newest first
DUPLICATES_SHOWN = 200  # likely duplicate pairs shown, the most probable first

router = APIRouter(prefix="/ui", include_in_schema=False)


# -- relabel decisions ------------------------------------------------------------------------------


@router.get("/relabel")
async def relabel(
    visit: VisitDep, audit: AuditServiceDep, outcome: str = "", include_undone: bool = False
) -> HTMLResponse:
    chosen = RelabelOutcome(outcome) if outcome in {o.value for o in RelabelOutcome} else None
    decisions = await in_thread(
        lambda: (
            audit.list_decisions(outcome=chosen, include_undone=include_undone, limit=PAGE, offset=0).items
        )
    )
    return visit.render(
        "relabel.html",
        nav="relabel",
        decisions=decisions,
        outcome=outcome,
        outcomes=[o.value for o in RelabelOutcome],
        include_undone=include_undone,
    )


@router.post("/relabel/{decision_id}/undo")
async def undo(visit: WriteDep, audit: AuditServiceDep, decision_id: str) -> RedirectResponse:
    visit.require(Role.CURATOR)
    with visit.reported("Decision undone."):
        await in_thread(lambda: audit.undo_decision(decision_id, actor=visit.caller.name))
    return see("/ui/relabel")


# -- the relabel queue ------------------------------------------------------------------------------


@router.get("/relabel-queue")
async def relabel_queue(
    visit: VisitDep, relabel: RelabelServiceDep, techniques: TechniqueServiceDep
) -> HTMLResponse:
    def load() -> dict[str, Any]:
        queue = relabel.list_queue(limit=QUEUED_SHOWN, offset=0)
        # The merge field starts on the most probable technique other than the one it is on now.
        suggested = {
            item.id: next((c.technique for c in item.candidates if c.technique != item.technique), "")
            for item in queue.items
        }
        names = [n for n in techniques.technique_names() if n != INITIAL_TECHNIQUE]
        return {"queue": queue, "suggested": suggested, "names": names}

    context: dict[str, Any] = {"queue": QueueList(items=[], total=0, limit=0, offset=0)}
    with visit.reported():
        context = await in_thread(load)
    context.setdefault("suggested", {})
    context.setdefault("names", [])
    return visit.render("relabel_queue.html", nav="relabel-queue", **context)


@router.post("/relabel-queue/{decision_id}/accept")
async def accept_queued(visit: WriteDep, relabel: RelabelServiceDep, decision_id: str) -> RedirectResponse:
    visit.require(Role.CURATOR)
    with visit.reported():
        done = await in_thread(lambda: relabel.resolve(decision_id, into=None, actor=visit.caller.name))
        visit.flash("ok", f"Accepted {done.candidate!r} on {done.technique!r}.")
    return see("/ui/relabel-queue")


@router.post("/relabel-queue/{decision_id}/merge")
async def merge_queued(visit: WriteDep, relabel: RelabelServiceDep, decision_id: str) -> Response:
    visit.require(Role.CURATOR)
    try:
        body = QueueMerge(into=visit.field("into"))
    except ValidationError:
        visit.flash("error", "name the technique to merge the name into")
        return see("/ui/relabel-queue")
    asked = confirm(
        visit,
        "Merge",
        f"Merge the queued name of decision {decision_id[:12]} into {body.into!r}: the examples "
        f"written under that name move to {body.into!r} and the name becomes one of its aliases.",
        "/ui/relabel-queue",
    )
    if asked is not None:
        return asked
    with visit.reported():
        done = await in_thread(lambda: relabel.resolve(decision_id, into=body.into, actor=visit.caller.name))
        visit.flash("ok", f"Merged {done.candidate!r} into {done.technique!r}.")
    return see("/ui/relabel-queue")


# -- likely duplicates ------------------------------------------------------------------------------


@router.get("/duplicates")
async def duplicates(
    visit: VisitDep, relabel: RelabelServiceDep, min_probability: str = "0.5"
) -> HTMLResponse:
    try:
        least = float(min_probability)
        if not 0.0 <= least <= 1.0:
            raise ValueError(min_probability)
    except ValueError:
        visit.flash("error", f"the least probability must be a number from 0 to 1, not {min_probability!r}")
        least = 0.5

    def load() -> dict[str, Any]:
        return {
            "duplicates": relabel.likely_duplicates(min_probability=least, limit=DUPLICATES_SHOWN),
            "kept": relabel.list_kept_separate(),
        }

    context: dict[str, Any] = {
        "duplicates": DuplicateList(items=[], techniques=0),
        "kept": KeptSeparateList(items=[]),
    }
    with visit.reported():
        context = await in_thread(load)
    return visit.render("duplicates.html", nav="duplicates", min_probability=least, **context)


def _pair(visit: Visit, first: str, second: str) -> PairReview | None:
    try:
        return PairReview(first=visit.field(first), second=visit.field(second))
    except ValidationError:
        visit.flash("error", "name both techniques of the pair")
        return None


@router.post("/duplicates/merge")
async def merge_duplicates(
    visit: WriteDep, relabel: RelabelServiceDep, techniques: TechniqueServiceDep
) -> Response:
    visit.require(Role.CURATOR)
    pair = _pair(visit, "keep", "merge")
    if pair is not None:
        body = DuplicateMerge(keep=pair.first, merge=pair.second)
        moves = await in_thread(lambda: what_moves(techniques, body.merge))
        asked = confirm(
            visit,
            "Merge",
            f"Merge {body.merge!r} into {body.keep!r}: {moves} move to {body.keep!r}; "
            f"{body.merge!r} and its aliases become aliases of {body.keep!r}.",
            "/ui/duplicates",
            undo_note=UNDO_NOTE,
        )
        if asked is not None:
            return asked
        with visit.reported(f"Merged {body.merge!r} into {body.keep!r}; its names are now aliases."):
            await in_thread(lambda: relabel.merge(body, actor=visit.caller.name))
    return see("/ui/duplicates")


@router.post("/duplicates/keep-separate")
async def keep_separate(visit: WriteDep, relabel: RelabelServiceDep) -> RedirectResponse:
    visit.require(Role.CURATOR)
    pair = _pair(visit, "first", "second")
    if pair is not None:
        with visit.reported(f"Kept {pair.first!r} and {pair.second!r} separate."):
            await in_thread(lambda: relabel.keep_separate(pair, actor=visit.caller.name))
    return see("/ui/duplicates")


@router.post("/duplicates/kept-separate/undo")
async def undo_keep_separate(visit: WriteDep, relabel: RelabelServiceDep) -> RedirectResponse:
    visit.require(Role.CURATOR)
    pair = _pair(visit, "first", "second")
    if pair is not None:
        with visit.reported(f"{pair.first!r} and {pair.second!r} may be listed as duplicates again."):
            await in_thread(lambda: relabel.undo_keep_separate(pair, actor=visit.caller.name))
    return see("/ui/duplicates")
