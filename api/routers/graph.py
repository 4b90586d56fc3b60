"""The reasoning graph over HTTP: retrieval, technique search, curation, relabel decisions, audit, keys.

Thin: each route checks the caller's role, calls `GraphService` (a worker thread runs it, since the
store is synchronous) and translates its errors. Every write is recorded with the key's name.
"""

from __future__ import annotations

import tempfile
from typing import Annotated

import anyio
from fastapi import APIRouter, Query, Request, Response, status
from starlette.datastructures import UploadFile

from api.auth import GraphServiceDep, RequireAdmin, RequireCurator, RequireReader
from api.errors import (
    ApiError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    ServiceUnavailableError,
    UnprocessableError,
    responses,
)
from api.graph.protocol import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyPublic,
    AuditEntryPublic,
    AuditList,
    DecisionList,
    DecisionPublic,
    ExampleList,
    ExamplePublic,
    ImportSummary,
    MergeRequest,
    RetrieveRequest,
    RetrieveResponse,
    ReviewRequest,
    SplitRequest,
    TechniqueCreate,
    TechniqueList,
    TechniquePublic,
    TechniqueSearchResponse,
    TechniqueUpdate,
    TransitionList,
)
from api.graph.service import (
    GraphConflictError,
    GraphServiceError,
    GraphUnavailableError,
    InvalidExportError,
    InvalidGraphRequestError,
    UnknownResourceError,
)
from graphdb.models import GraphExport, RelabelOutcome, ReviewStatus

router = APIRouter(prefix="/v1", tags=["graph"])

READ = responses()
READ_ONE = responses(404)
WRITE = responses(403, 404, 409, 413)


def api_error(error: GraphServiceError) -> ApiError:
    """The HTTP error for a service error."""
    if isinstance(error, UnknownResourceError):
        return NotFoundError(str(error))
    if isinstance(error, InvalidGraphRequestError):
        return BadRequestError(str(error))
    if isinstance(error, GraphConflictError):
        return ConflictError(str(error))
    if isinstance(error, GraphUnavailableError):
        return ServiceUnavailableError(str(error))
    if isinstance(error, InvalidExportError):
        return UnprocessableError(str(error))
    return ApiError(str(error))


_SPOOL_IN_MEMORY = 8_000_000  # an upload larger than this goes to a temporary file
_SPOOL_CHUNK = 1_048_576

Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="items to skip")]


# -- retrieval ----------------------------------------------------------------------------------------


@router.post(
    "/retrieve",
    summary="Successors of a technique with statistics and the examples most similar to the given code",
    responses=responses(404, 413),
)
def retrieve(body: RetrieveRequest, caller: RequireReader, service: GraphServiceDep) -> RetrieveResponse:
    return service.retrieve(body)


# -- techniques ---------------------------------------------------------------------------------------


@router.get(
    "/techniques/search",
    summary="Find techniques by free text (full-text and embedding search, fused)",
    responses=responses(400),
)
def search_techniques(
    caller: RequireReader,
    service: GraphServiceDep,
    q: Annotated[str, Query(min_length=1, max_length=500, description="free text")],
    k: Annotated[int, Query(ge=1, le=100, description="most hits returned")] = 10,
) -> TechniqueSearchResponse:
    return service.search_techniques(q, k)


@router.get("/techniques", summary="List techniques by name", responses=READ)
def list_techniques(
    caller: RequireReader, service: GraphServiceDep, limit: Limit = 100, offset: Offset = 0
) -> TechniqueList:
    return service.list_techniques(limit, offset)


@router.post(
    "/techniques", status_code=status.HTTP_201_CREATED, summary="Add a technique (curator)", responses=WRITE
)
def create_technique(
    body: TechniqueCreate, caller: RequireCurator, service: GraphServiceDep
) -> TechniquePublic:
    return service.create_technique(body, actor=caller.name)


@router.post(
    "/techniques/merge",
    summary="Fold one technique into another: transitions and examples move, names become aliases (curator)",
    responses=responses(400, 403, 404, 409, 413),
)
def merge_techniques(body: MergeRequest, caller: RequireCurator, service: GraphServiceDep) -> TechniquePublic:
    return service.merge_techniques(body, actor=caller.name)


# `:path` because technique names may hold a slash ("Precomputation / lookup table").
@router.get("/techniques/{name:path}", summary="One technique by exact name", responses=READ_ONE)
def get_technique(name: str, caller: RequireReader, service: GraphServiceDep) -> TechniquePublic:
    return service.get_technique(name)


@router.patch(
    "/techniques/{name:path}",
    summary="Rename a technique (the old name stays an alias) and/or change its description (curator)",
    responses=responses(400, 403, 404, 409, 413),
)
def update_technique(
    name: str, body: TechniqueUpdate, caller: RequireCurator, service: GraphServiceDep
) -> TechniquePublic:
    return service.update_technique(name, body, actor=caller.name)


# -- transitions and examples -------------------------------------------------------------------------


@router.get(
    "/transitions",
    summary="List transitions with their statistics, or get one by its two ends",
    responses=responses(400, 404),
)
def list_transitions(
    caller: RequireReader,
    service: GraphServiceDep,
    source: Annotated[
        str | None, Query(description="with target: only the transition source -> target")
    ] = None,
    target: Annotated[
        str | None, Query(description="with source: only the transition source -> target")
    ] = None,
    limit: Limit = 1000,
    offset: Offset = 0,
) -> TransitionList:
    return service.list_transitions(source=source, target=target, limit=limit, offset=offset)


@router.get(
    "/examples",
    summary="Examples of one transition (source and target) or all examples in a review status",
    responses=responses(400, 404),
)
def list_examples(
    caller: RequireReader,
    service: GraphServiceDep,
    source: Annotated[str | None, Query(description="the transition's source technique")] = None,
    target: Annotated[str | None, Query(description="the transition's target technique")] = None,
    status: Annotated[ReviewStatus | None, Query(description="only examples in this review status")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> ExampleList:
    return service.list_examples(source=source, target=target, status=status, limit=limit, offset=offset)


@router.get("/examples/{example_id}", summary="One example", responses=READ_ONE)
def get_example(example_id: str, caller: RequireReader, service: GraphServiceDep) -> ExamplePublic:
    return service.get_example(example_id)


@router.post(
    "/examples/{example_id}/review",
    summary="Approve or reject an example; rejected ones leave retrieval and the statistics (curator)",
    responses=WRITE,
)
def review_example(
    example_id: str, body: ReviewRequest, caller: RequireCurator, service: GraphServiceDep
) -> ExamplePublic:
    return service.review_example(example_id, body, actor=caller.name)


@router.delete(
    "/examples/{example_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete an example (curator)",
    responses=responses(403, 404),
)
def delete_example(example_id: str, caller: RequireCurator, service: GraphServiceDep) -> Response:
    service.delete_example(example_id, actor=caller.name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/examples/{example_id}/split",
    summary="Move a mislabeled example to another transition, created when missing (curator)",
    responses=responses(400, 403, 404, 409, 413),
)
def split_example(
    example_id: str, body: SplitRequest, caller: RequireCurator, service: GraphServiceDep
) -> ExamplePublic:
    return service.split_example(example_id, body, actor=caller.name)


# -- relabel decisions and audit ----------------------------------------------------------------------


@router.get(
    "/relabel-decisions",
    summary="Relabeling decisions of the graph construction, newest first (outcome=flagged: for curators)",
    responses=READ,
)
def list_decisions(
    caller: RequireReader,
    service: GraphServiceDep,
    outcome: Annotated[RelabelOutcome | None, Query(description="only decisions with this outcome")] = None,
    include_undone: Annotated[bool, Query(description="also decisions already undone")] = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> DecisionList:
    return service.list_decisions(outcome=outcome, include_undone=include_undone, limit=limit, offset=offset)


@router.post(
    "/relabel-decisions/{decision_id}/undo",
    summary="Undo a relabeling: split a merged name back out, or merge a new/flagged one (curator)",
    responses=responses(403, 404, 409),
)
def undo_decision(decision_id: str, caller: RequireCurator, service: GraphServiceDep) -> DecisionPublic:
    return service.undo_decision(decision_id, actor=caller.name)


@router.get("/audit", summary="Who changed what and when, newest first", responses=READ)
def list_audit(
    caller: RequireReader,
    service: GraphServiceDep,
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
def undo_audited_merge(audit_id: str, caller: RequireCurator, service: GraphServiceDep) -> AuditEntryPublic:
    return service.undo_merge(audit_id, actor=caller.name)


# -- whole graph and keys -----------------------------------------------------------------------------


@router.get(
    "/graph/export",
    summary="The whole graph as one regraph.graph/v1 document; API keys are not part of it (admin)",
    responses=responses(403),
)
def export_graph(caller: RequireAdmin, service: GraphServiceDep) -> GraphExport:
    return service.export_graph()


@router.post(
    "/graph/import",
    summary="Load an export into an empty graph, all or nothing; API keys in it are ignored (admin)",
    responses=responses(400, 403, 409, 413),
)
def import_graph(body: GraphExport, caller: RequireAdmin, service: GraphServiceDep) -> ImportSummary:
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
    request: Request, caller: RequireAdmin, service: GraphServiceDep
) -> ImportSummary:
    # The edge allows this path REGRAPH_MAX_IMPORT_BYTES (admins only); the body is spooled to a
    # temporary file as it arrives, never held whole in a request buffer.
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            async with request.form(max_files=1, max_fields=1) as form:
                upload = form.get("file")
                if not isinstance(upload, UploadFile):
                    raise BadRequestError("send the export as the multipart form's `file`")
                while chunk := await upload.read(_SPOOL_CHUNK):
                    spool.write(chunk)
        else:
            async for chunk in request.stream():
                spool.write(chunk)
        spool.seek(0)
        return await anyio.to_thread.run_sync(lambda: service.import_upload(spool.read(), actor=caller.name))


@router.post(
    "/keys",
    status_code=status.HTTP_201_CREATED,
    summary="Create an API key; its token is in this response only (admin)",
    responses=responses(403, 409),
)
def create_key(body: ApiKeyCreate, caller: RequireAdmin, service: GraphServiceDep) -> ApiKeyCreated:
    return service.create_key(body, actor=caller.name)


@router.get("/keys", summary="List API keys, without tokens (admin)", responses=responses(403))
def list_keys(caller: RequireAdmin, service: GraphServiceDep) -> list[ApiKeyPublic]:
    return service.list_keys()


@router.post(
    "/keys/{key_id}/revoke",
    summary="Revoke an API key (admin); the last live admin key cannot be revoked (409)",
    responses=responses(403, 404, 409),
)
def revoke_key(key_id: str, caller: RequireAdmin, service: GraphServiceDep) -> ApiKeyPublic:
    return service.revoke_key(key_id, actor=caller.name)
