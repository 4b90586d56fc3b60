"""``POST /v1/retrieve``: the successors of a technique with the examples closest to a code (thin: the
reader's role, then `RetrievalService.retrieve`).
"""

from __future__ import annotations

from fastapi import APIRouter

from api.auth import RequireReader
from api.deps import RetrievalServiceDep
from api.errors import responses
from api.retrieve.models import RetrieveRequest, RetrieveResponse

router = APIRouter(prefix="/v1", tags=["graph"])


@router.post(
    "/retrieve",
    summary="Successors of a technique with statistics and the examples most similar to the given code",
    responses=responses(404, 413),
)
def retrieve(body: RetrieveRequest, caller: RequireReader, service: RetrievalServiceDep) -> RetrieveResponse:
    return service.retrieve(body)
