"""The transfer forms of the admin page: the whole graph exported as one file, and a file imported."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response
from starlette.datastructures import UploadFile

from api.deps import TransferServiceDep
from api.ui.visitor import VisitDep, WriteDep, in_thread, see
from graphdb.models import Role

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/admin/export")
async def export(visit: VisitDep, service: TransferServiceDep) -> Response:
    visit.require(Role.ADMIN)
    exported = await in_thread(service.export_graph)
    return Response(
        exported.model_dump_json(),
        media_type="application/json",
        headers={"Content-Disposition": 'attachment; filename="regraph-graph.json"'},
    )


@router.post("/admin/import")
async def import_graph(visit: WriteDep, service: TransferServiceDep) -> RedirectResponse:
    visit.require(Role.ADMIN)
    upload = visit.form.get("file") if visit.form is not None else None
    if not isinstance(upload, UploadFile):
        visit.flash("error", "choose an export file to import")
        return see("/ui/admin")
    # The form's file was spooled to disk as it arrived; the edge allows an admin's import
    # REGRAPH_MAX_IMPORT_BYTES and answers a page saying so past it.
    raw = await upload.read()
    if not raw.strip():  # a form sent without a file carries an empty one
        visit.flash("error", "no file was chosen (or it is empty): choose an export file to import")
        return see("/ui/admin")
    with visit.reported():
        summary = await in_thread(lambda: service.import_upload(raw, actor=visit.caller.name))
        ignored = (
            f" The file's {summary.api_keys_ignored} API key(s) were ignored: keys are never imported."
            if summary.api_keys_ignored
            else ""
        )
        visit.flash(
            "ok", f"Imported {summary.techniques} techniques and {summary.examples} examples.{ignored}"
        )
    return see("/ui/admin")
