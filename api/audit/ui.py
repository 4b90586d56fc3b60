"""The audit pages of the curation workspace: the audit log, filtered, and the undo of a merge."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse

from api.deps import AuditServiceDep
from api.ui.visitor import PAGE, VisitDep, WriteDep, in_thread, see
from graphdb.models import Role

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/audit")
async def audit(
    visit: VisitDep,
    service: AuditServiceDep,
    actor: str = "",
    action: str = "",
    target: str = "",
    since: str = "",
    until: str = "",
) -> HTMLResponse:
    entries = await in_thread(lambda: service.list_audit(target=target or None, limit=PAGE, offset=0).items)
    actors = sorted({e.actor for e in entries})
    actions = sorted({e.action for e in entries})
    shown = [
        e
        for e in entries
        if (not actor or e.actor == actor)
        and (not action or e.action == action)
        and (not since or e.at.isoformat() >= since)
        and (not until or e.at.isoformat()[: len(until)] <= until)
    ]
    undone = {e.target.removeprefix("audit:") for e in entries if e.action == "technique.merge.undo"}
    return visit.render(
        "audit.html",
        nav="audit",
        entries=shown,
        undone=undone,
        # What a merge records for its undo (a whole technique, every moved example) stays off the page.
        details={e.id: {k: v for k, v in e.details.items() if k != "undo"} for e in shown},
        actors=actors,
        actions=actions,
        params={"actor": actor, "action": action, "target": target, "since": since, "until": until},
    )


@router.post("/audit/{audit_id}/undo")
async def undo_merge(visit: WriteDep, service: AuditServiceDep, audit_id: str) -> RedirectResponse:
    visit.require(Role.CURATOR)
    with visit.reported():
        done = await in_thread(lambda: service.undo_merge(audit_id, actor=visit.caller.name))
        visit.flash("ok", f"Merge undone: {done.details.get('merged')!r} is a technique again, as it was.")
    return see("/ui/audit")
