"""The audit log over HTTP: who changed what and when, and the exact undo of an audited merge."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.audit.models import AuditEntryPublic, AuditList
from api.auth import RequireCurator, RequireReader
from api.deps import AuditServiceDep, Limit, Offset
from api.errors import responses

router = APIRouter(prefix="/v1", tags=["graph"])


@router.get("/audit", summary="Who changed what and when, newest first", responses=responses())
def list_audit(
    caller: RequireReader,
    service: AuditServiceDep,
    target: Annotated[
        str | None, Query(description='only entries about this target, e.g. "technique:Loop unrolling"')
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> AuditList:
    return service.list_audit(target=target, limit=limit, offset=offset)


@router.post(
    "/audit/{audit_id}/undo",
    summary="Undo the technique merge an audit entry records, exactly; the undo is audited (curator)",
    responses=responses(403, 404, 409),
)
def undo_audited_merge(audit_id: str, caller: RequireCurator, service: AuditServiceDep) -> AuditEntryPublic:
    return service.undo_merge(audit_id, actor=caller.name)
