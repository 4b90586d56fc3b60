"""Techniques and transitions over HTTP: list, search, create, rename, merge (thin: roles, then
`TechniqueService`, whose errors the app-wide handler answers). Every write is recorded with the key's name.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from api.auth import RequireCurator, RequireReader
from api.deps import Limit, Offset, RetrievalServiceDep, TechniqueServiceDep
from api.errors import responses
from api.techniques.models import (
    MergeRequest,
    TechniqueCreate,
    TechniqueList,
    TechniquePublic,
    TechniqueSearchResponse,
    TechniqueUpdate,
    TransitionList,
)

router = APIRouter(prefix="/v1", tags=["graph"])

READ = responses()
READ_ONE = responses(404)
WRITE = responses(403, 404, 409, 413)


@router.get(
    "/techniques/search",
    summary="Find techniques by free text (full-text and embedding search, fused)",
    responses=responses(400),
)
def search_techniques(
    caller: RequireReader,
    service: RetrievalServiceDep,
    q: Annotated[str, Query(min_length=1, max_length=500, description="free text")],
    k: Annotated[int, Query(ge=1, le=100, description="most hits returned")] = 10,
) -> TechniqueSearchResponse:
    return service.search_techniques(q, k)


@router.get("/techniques", summary="List techniques by name", responses=READ)
def list_techniques(
    caller: RequireReader, service: TechniqueServiceDep, limit: Limit = 100, offset: Offset = 0
) -> TechniqueList:
    return service.list_techniques(limit, offset)


@router.post(
    "/techniques", status_code=status.HTTP_201_CREATED, summary="Add a technique (curator)", responses=WRITE
)
def create_technique(
    body: TechniqueCreate, caller: RequireCurator, service: TechniqueServiceDep
) -> TechniquePublic:
    return service.create_technique(body, actor=caller.name)


@router.post(
    "/techniques/merge",
    summary="Fold one technique into another: transitions and examples move, names become aliases (curator)",
    responses=responses(400, 403, 404, 409, 413),
)
def merge_techniques(
    body: MergeRequest, caller: RequireCurator, service: TechniqueServiceDep
) -> TechniquePublic:
    return service.merge_techniques(body, actor=caller.name)


# `:path` because technique names may hold a slash ("Precomputation / lookup table").
@router.get("/techniques/{name:path}", summary="One technique by exact name", responses=READ_ONE)
def get_technique(name: str, caller: RequireReader, service: TechniqueServiceDep) -> TechniquePublic:
    return service.get_technique(name)


@router.patch(
    "/techniques/{name:path}",
    summary="Rename a technique (the old name stays an alias) and/or change its description (curator)",
    responses=responses(400, 403, 404, 409, 413),
)
def update_technique(
    name: str, body: TechniqueUpdate, caller: RequireCurator, service: TechniqueServiceDep
) -> TechniquePublic:
    return service.update_technique(name, body, actor=caller.name)


@router.get(
    "/transitions",
    summary="List transitions with their statistics, or get one by its two ends",
    responses=responses(400, 404),
)
def list_transitions(
    caller: RequireReader,
    service: TechniqueServiceDep,
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
