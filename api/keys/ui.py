"""The admin page of the curation workspace and its API keys: list, create (the token shown once) and
revoke. The page's export and import forms are the transfer feature's (api/transfer/ui.py)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from api.deps import KeyServiceDep, TransferServiceDep
from api.keys.models import ApiKeyCreate, ApiKeyCreated
from api.keys.service import KeyService
from api.transfer.service import TransferService
from api.ui.visitor import Visit, VisitDep, WriteDep, in_thread, see
from graphdb.models import Role

router = APIRouter(prefix="/ui", include_in_schema=False)


async def _admin_page(
    visit: Visit, service: KeyService, transfer: TransferService, created: ApiKeyCreated | None
) -> HTMLResponse:
    keys = await in_thread(service.list_keys)
    counts = await in_thread(transfer.counts)  # what an export would hold, beside its form
    return visit.render(
        "admin.html", nav="admin", keys=keys, created=created, counts=counts, roles=list(Role)
    )


@router.get("/admin")
async def admin(visit: VisitDep, service: KeyServiceDep, transfer: TransferServiceDep) -> HTMLResponse:
    visit.require(Role.ADMIN)
    return await _admin_page(visit, service, transfer, None)


@router.post("/admin/keys")
async def create_key(visit: WriteDep, service: KeyServiceDep, transfer: TransferServiceDep) -> Response:
    visit.require(Role.ADMIN)
    try:
        body = ApiKeyCreate(name=visit.field("name"), role=Role(visit.field("role")))
    except (ValueError, ValidationError):
        visit.flash("error", "a key needs a name (letters, digits, . _ @ -) and a role")
        return see("/ui/admin")
    created = None
    with visit.reported():
        created = await in_thread(lambda: service.create_key(body, actor=visit.caller.name))
    if created is None:
        return see("/ui/admin")
    # Rendered, not redirected: the token is shown this once and never stored anywhere.
    return await _admin_page(visit, service, transfer, created)


@router.post("/admin/keys/{key_id}/revoke")
async def revoke_key(visit: WriteDep, service: KeyServiceDep, key_id: str) -> RedirectResponse:
    visit.require(Role.ADMIN)
    with visit.reported("Key revoked."):
        await in_thread(lambda: service.revoke_key(key_id, actor=visit.caller.name))
    return see("/ui/admin")
