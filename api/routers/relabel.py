"""The relabel review queue and likely duplicates over HTTP (thin: roles, the service, its errors).

Routes are plain functions: FastAPI runs them in a worker thread, since the store is synchronous.

- `GET /v1/relabel-queue`: decisions waiting for a curator, with candidates, probabilities and code evidence;
- `POST /v1/relabel-queue/{id}/accept`: keep the decision as it is;
- `POST /v1/relabel-queue/{id}/merge` `{"into": technique}`: move the name (and its examples) into a technique;
- `GET /v1/technique-duplicates`: likely duplicate technique pairs, most probable first;
- `POST /v1/technique-duplicates/merge` `{"keep", "merge"}`: fold one into the other in one call;
- `POST /v1/technique-duplicates/keep-separate` `{"first", "second"}`: a reviewed pair stays apart and
  leaves the listing; `GET /v1/technique-duplicates/kept-separate` lists those pairs and
  `POST /v1/technique-duplicates/kept-separate/undo` `{"first", "second"}` forgets one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from api.auth import RequireCurator, RequireReader
from api.deps import get_state
from api.errors import ServiceUnavailableError, responses
from api.graph.protocol import TechniquePublic
from api.graph.service import GraphServiceError
from api.relabel.protocol import (
    DuplicateList,
    DuplicateMerge,
    KeptSeparateList,
    KeptSeparatePublic,
    PairReview,
    QueueList,
    QueueMerge,
    QueueResolution,
)
from api.relabel.service import RelabelService
from api.routers.graph import Limit, Offset, api_error
from api.state import AppState

router = APIRouter(prefix="/v1", tags=["relabel"])


def get_relabel_service(state: Annotated[AppState, Depends(get_state)]) -> RelabelService:
    """The relabel service over the app's store and its (lazily built, cached) relabel policy."""
    if state.graph_store is None or state.embedder is None:
        raise ServiceUnavailableError("the graph store is starting or stopping")
    return RelabelService(state.graph_store, state.relabel_policy())


RelabelServiceDep = Annotated[RelabelService, Depends(get_relabel_service)]


@router.get(
    "/relabel-queue",
    summary="Relabel decisions waiting for a curator, with the evidence (candidates, probabilities, code)",
    responses=responses(),
)
def list_queue(
    caller: RequireReader, service: RelabelServiceDep, limit: Limit = 100, offset: Offset = 0
) -> QueueList:
    try:
        return service.list_queue(limit=limit, offset=offset)
    except GraphServiceError as e:
        raise api_error(e) from e


@router.post(
    "/relabel-queue/{decision_id}/accept",
    summary="Keep a queued decision as it is (curator)",
    responses=responses(403, 404, 409),
)
def accept(decision_id: str, caller: RequireCurator, service: RelabelServiceDep) -> QueueResolution:
    try:
        return service.resolve(decision_id, into=None, actor=caller.name)
    except GraphServiceError as e:
        raise api_error(e) from e


@router.post(
    "/relabel-queue/{decision_id}/merge",
    summary="Move a queued name, with its examples, into an existing technique (curator)",
    responses=responses(400, 403, 404, 409),
)
def merge_queued(
    decision_id: str, body: QueueMerge, caller: RequireCurator, service: RelabelServiceDep
) -> QueueResolution:
    try:
        return service.resolve(decision_id, into=body.into, actor=caller.name)
    except GraphServiceError as e:
        raise api_error(e) from e


@router.get(
    "/technique-duplicates",
    summary="Technique pairs that probably name one technique, most probable first",
    responses=responses(400),
)
def likely_duplicates(
    caller: RequireReader,
    service: RelabelServiceDep,
    min_probability: Annotated[
        float, Query(ge=0.0, le=1.0, description="the least probability listed")
    ] = 0.5,
    limit: Annotated[int, Query(ge=1, le=1000, description="most pairs returned")] = 50,
) -> DuplicateList:
    try:
        return service.likely_duplicates(min_probability=min_probability, limit=limit)
    except GraphServiceError as e:
        raise api_error(e) from e


@router.post(
    "/technique-duplicates/merge",
    summary="Fold one technique into another in one call: aliases kept, transitions and examples moved (curator)",
    responses=responses(400, 403, 404, 409),
)
def merge_duplicates(
    body: DuplicateMerge, caller: RequireCurator, service: RelabelServiceDep
) -> TechniquePublic:
    try:
        technique = service.merge(body, actor=caller.name)
    except GraphServiceError as e:
        raise api_error(e) from e
    return TechniquePublic.of(technique)


@router.post(
    "/technique-duplicates/keep-separate",
    summary="Keep a reviewed pair of techniques apart: the likely duplicates leave it out (curator)",
    responses=responses(400, 403, 404),
)
def keep_separate(body: PairReview, caller: RequireCurator, service: RelabelServiceDep) -> KeptSeparatePublic:
    try:
        return service.keep_separate(body, actor=caller.name)
    except GraphServiceError as e:
        raise api_error(e) from e


@router.get(
    "/technique-duplicates/kept-separate",
    summary="Technique pairs a curator kept apart, the latest first",
    responses=responses(),
)
def list_kept_separate(caller: RequireReader, service: RelabelServiceDep) -> KeptSeparateList:
    try:
        return service.list_kept_separate()
    except GraphServiceError as e:
        raise api_error(e) from e


@router.post(
    "/technique-duplicates/kept-separate/undo",
    summary="Forget that a pair was kept apart: it may be listed as a likely duplicate again (curator)",
    responses=responses(400, 403, 404, 409),
)
def undo_keep_separate(
    body: PairReview, caller: RequireCurator, service: RelabelServiceDep
) -> KeptSeparateList:
    try:
        service.undo_keep_separate(body, actor=caller.name)
        return service.list_kept_separate()
    except GraphServiceError as e:
        raise api_error(e) from e
