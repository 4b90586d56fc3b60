"""``POST /v1/retrieve``: the successors of a technique with the examples closest to a code (thin: the
reader's role, then `GraphService.retrieve`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from api.auth import RequireReader, get_graph_service
from api.errors import responses
from api.retrieve.models import RetrieveRequest, RetrieveResponse
from api.retrieve.service import RetrievalService

# The graph service as this feature's routes use it (the app's one GraphService is each of these).
RetrievalServiceDep = Annotated[RetrievalService, Depends(get_graph_service)]


router = APIRouter(prefix="/v1", tags=["graph"])


@router.post(
    "/retrieve",
    summary="Successors of a technique with statistics and the examples most similar to the given code",
    responses=responses(404, 413),
)
def retrieve(body: RetrieveRequest, caller: RequireReader, service: RetrievalServiceDep) -> RetrieveResponse:
    return service.retrieve(body)
