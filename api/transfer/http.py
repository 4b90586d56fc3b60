"""The whole graph over HTTP: export, and import into an empty graph (admin)."""

from __future__ import annotations

import tempfile

import anyio
from fastapi import APIRouter, Request
from starlette.datastructures import UploadFile

from api.auth import RequireAdmin
from api.deps import TransferServiceDep
from api.errors import ServiceError, ServiceErrorKind, responses
from api.transfer.models import ImportSummary
from graphdb.models import GraphExport

router = APIRouter(prefix="/v1", tags=["graph"])

_SPOOL_IN_MEMORY = 8_000_000  # an upload larger than this goes to a temporary file
_SPOOL_CHUNK = 1_048_576


@router.get(
    "/graph/export",
    summary="The whole graph as one regraph.graph/v1 document; API keys are not part of it (admin)",
    responses=responses(403),
)
def export_graph(caller: RequireAdmin, service: TransferServiceDep) -> GraphExport:
    return service.export_graph()


@router.post(
    "/graph/import",
    summary="Load an export into an empty graph, all or nothing; API keys in it are ignored (admin)",
    responses=responses(400, 403, 409, 413),
)
def import_graph(body: GraphExport, caller: RequireAdmin, service: TransferServiceDep) -> ImportSummary:
    return service.import_graph(body, actor=caller.name)


_UPLOAD_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/GraphExport"}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            }
        },
    },
}


@router.post(
    "/graph/import/upload",
    summary="Load an export file of any size up to REGRAPH_MAX_IMPORT_BYTES, streamed to disk: the file "
    "as the body, or a multipart form's `file` (admin, checked before the body)",
    responses=responses(400, 403, 409, 413),
    openapi_extra={"requestBody": _UPLOAD_BODY},
)
async def import_graph_upload(
    request: Request, caller: RequireAdmin, service: TransferServiceDep
) -> ImportSummary:
    # The edge allows this path REGRAPH_MAX_IMPORT_BYTES (admins only); the body is spooled to a
    # temporary file as it arrives, never held whole in a request buffer.
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            async with request.form(max_files=1, max_fields=1) as form:
                upload = form.get("file")
                if not isinstance(upload, UploadFile):
                    raise ServiceError(
                        "send the export as the multipart form's `file`", kind=ServiceErrorKind.INVALID
                    )
                while chunk := await upload.read(_SPOOL_CHUNK):
                    spool.write(chunk)
        else:
            async for chunk in request.stream():
                spool.write(chunk)
        spool.seek(0)
        return await anyio.to_thread.run_sync(lambda: service.import_upload(spool.read(), actor=caller.name))
