"""Examples over HTTP: list, read, review, split, delete (thin: roles, then `ExampleService`, whose errors
the app-wide handler answers). Every write is recorded with the key's name.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from api.auth import RequireCurator, RequireReader
from api.deps import ExampleServiceDep, Limit, Offset
from api.errors import responses
from api.examples.models import ExampleList, ExamplePublic, ReviewRequest, SplitRequest
from graphdb.models import ReviewStatus

router = APIRouter(prefix="/v1", tags=["graph"])

READ_ONE = responses(404)
WRITE = responses(403, 404, 409, 413)


@router.get(
    "/examples",
    summary="Examples of one transition (source and target) or all examples in a review status",
    responses=responses(400, 404),
)
def list_examples(
    caller: RequireReader,
    service: ExampleServiceDep,
    source: Annotated[str | None, Query(description="the transition's source technique")] = None,
    target: Annotated[str | None, Query(description="the transition's target technique")] = None,
    status: Annotated[ReviewStatus | None, Query(description="only examples in this review status")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> ExampleList:
    return service.list_examples(source=source, target=target, status=status, limit=limit, offset=offset)


@router.get("/examples/{example_id}", summary="One example", responses=READ_ONE)
def get_example(example_id: str, caller: RequireReader, service: ExampleServiceDep) -> ExamplePublic:
    return service.get_example(example_id)


@router.post(
    "/examples/{example_id}/review",
    summary="Approve or reject an example; rejected ones leave retrieval and the statistics (curator)",
    responses=WRITE,
)
def review_example(
    example_id: str, body: ReviewRequest, caller: RequireCurator, service: ExampleServiceDep
) -> ExamplePublic:
    return service.review_example(example_id, body, actor=caller.name)


@router.delete(
    "/examples/{example_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete an example (curator)",
    responses=responses(403, 404),
)
def delete_example(example_id: str, caller: RequireCurator, service: ExampleServiceDep) -> Response:
    service.delete_example(example_id, actor=caller.name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/examples/{example_id}/split",
    summary="Move a mislabeled example to another transition, created when missing (curator)",
    responses=responses(400, 403, 404, 409, 413),
)
def split_example(
    example_id: str, body: SplitRequest, caller: RequireCurator, service: ExampleServiceDep
) -> ExamplePublic:
    return service.split_example(example_id, body, actor=caller.name)
