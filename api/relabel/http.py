"""Relabeling over HTTP: the construction's decisions, the review queue and likely duplicates (thin:
roles, then the service; its errors are answered by the app-wide handler).

Routes are plain functions: FastAPI runs them in a worker thread, since the store is synchronous.

- `GET /v1/relabel-decisions`, `POST /v1/relabel-decisions/{id}/undo`: the construction's decisions;

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

from fastapi import APIRouter, Query

from api.auth import RequireCurator, RequireReader
from api.deps import AuditServiceDep, Limit, Offset, RelabelServiceDep
from api.errors import responses
from api.relabel.models import (
    DecisionList,
    DecisionPublic,
    DuplicateList,
    DuplicateMerge,
    KeptSeparateList,
    KeptSeparatePublic,
    PairReview,
    QueueList,
    QueueMerge,
    QueueResolution,
)
from api.techniques.models import TechniquePublic
from graphdb.models import RelabelOutcome

router = APIRouter(prefix="/v1", tags=["relabel"])
decisions_router = APIRouter(prefix="/v1", tags=["graph"])
"""The construction's relabeling decisions (documented with the graph's routes, as before the cut)."""


@router.get(
    "/relabel-queue",
    summary="Relabel decisions waiting for a curator, with the evidence (candidates, probabilities, code)",
    responses=responses(),
)
def list_queue(
    caller: RequireReader, service: RelabelServiceDep, limit: Limit = 100, offset: Offset = 0
) -> QueueList:
    return service.list_queue(limit=limit, offset=offset)


@router.post(
    "/relabel-queue/{decision_id}/accept",
    summary="Keep a queued decision as it is (curator)",
    responses=responses(403, 404, 409),
)
def accept(decision_id: str, caller: RequireCurator, service: RelabelServiceDep) -> QueueResolution:
    return service.resolve(decision_id, into=None, actor=caller.name)


@router.post(
    "/relabel-queue/{decision_id}/merge",
    summary="Move a queued name, with its examples, into an existing technique (curator)",
    responses=responses(400, 403, 404, 409),
)
def merge_queued(
    decision_id: str, body: QueueMerge, caller: RequireCurator, service: RelabelServiceDep
) -> QueueResolution:
    return service.resolve(decision_id, into=body.into, actor=caller.name)


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
    return service.likely_duplicates(min_probability=min_probability, limit=limit)


@router.post(
    "/technique-duplicates/merge",
    summary="Fold one technique into another in one call: aliases kept, transitions and examples moved (curator)",
    responses=responses(400, 403, 404, 409),
)
def merge_duplicates(
    body: DuplicateMerge, caller: RequireCurator, service: RelabelServiceDep
) -> TechniquePublic:
    technique = service.merge(body, actor=caller.name)
    return TechniquePublic.of(technique)


@router.post(
    "/technique-duplicates/keep-separate",
    summary="Keep a reviewed pair of techniques apart: the likely duplicates leave it out (curator)",
    responses=responses(400, 403, 404),
)
def keep_separate(body: PairReview, caller: RequireCurator, service: RelabelServiceDep) -> KeptSeparatePublic:
    return service.keep_separate(body, actor=caller.name)


@router.get(
    "/technique-duplicates/kept-separate",
    summary="Technique pairs a curator kept apart, the latest first",
    responses=responses(),
)
def list_kept_separate(caller: RequireReader, service: RelabelServiceDep) -> KeptSeparateList:
    return service.list_kept_separate()


@router.post(
    "/technique-duplicates/kept-separate/undo",
    summary="Forget that a pair was kept apart: it may be listed as a likely duplicate again (curator)",
    responses=responses(400, 403, 404, 409),
)
def undo_keep_separate(
    body: PairReview, caller: RequireCurator, service: RelabelServiceDep
) -> KeptSeparateList:
    service.undo_keep_separate(body, actor=caller.name)
    return service.list_kept_separate()


@decisions_router.get(
    "/relabel-decisions",
    summary="Relabeling decisions of the graph construction, newest first (outcome=flagged: for curators)",
    responses=responses(),
)
def list_decisions(
    caller: RequireReader,
    service: AuditServiceDep,
    outcome: Annotated[RelabelOutcome | None, Query(description="only decisions with this outcome")] = None,
    include_undone: Annotated[bool, Query(description="also decisions already undone")] = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> DecisionList:
    return service.list_decisions(outcome=outcome, include_undone=include_undone, limit=limit, offset=offset)


@decisions_router.post(
    "/relabel-decisions/{decision_id}/undo",
    summary="Undo a relabeling: split a merged name back out, or merge a new/flagged one (curator)",
    responses=responses(403, 404, 409),
)
def undo_decision(decision_id: str, caller: RequireCurator, service: AuditServiceDep) -> DecisionPublic:
    return service.undo_decision(decision_id, actor=caller.name)
