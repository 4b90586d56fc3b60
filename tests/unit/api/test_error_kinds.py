"""One error root, one mapping per face: every service error of the API answers HTTP by its kind, with
the status and wire type each family had before the families shared a root (issue 30)."""

from __future__ import annotations

import pytest

from api.errors import ServiceError, ServiceErrorKind, http_error, status_of
from api.graph.errors import (
    GraphConflictError,
    GraphUnavailableError,
    InvalidApiKeyError,
    InvalidExportError,
    InvalidGraphRequestError,
    QueryAnswerTooLargeError,
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
    UnknownResourceError,
)
from api.limits import ClientGoneError, KeyBusyError, OverTimeError, ServerBusyError
from api.mcp.tools import tool_error
from api.optimize.errors import (
    InvalidTaskError,
    JobAlreadyFinishedError,
    JobStorageError,
    JobUnknownError,
    NotConfiguredError,
    TaskNotFoundError,
    TooManyJobsError,
)

CASES: list[tuple[ServiceError, int, str, str | None]] = [
    (UnknownResourceError("x"), 404, "not_found", None),
    (InvalidGraphRequestError("x"), 400, "bad_request", None),
    (GraphConflictError("x"), 409, "conflict", None),
    (GraphUnavailableError("x"), 503, "service_unavailable", "5"),
    (InvalidExportError("x"), 422, "validation_error", None),
    (InvalidApiKeyError("x"), 401, "unauthorized", None),
    (QueryRefusedError("x"), 400, "cypher_refused", None),
    (QueryFailedError("x"), 400, "cypher_error", None),
    (QueryTimedOutError("x"), 400, "cypher_timeout", None),
    (QueryAnswerTooLargeError("x"), 413, "cypher_answer_too_large", None),
    (KeyBusyError("x", work="cypher"), 429, "rate_limited", "1"),
    (ServerBusyError("x", work="cypher", retry_after_s=2), 503, "service_unavailable", "2"),
    (OverTimeError("x", work="evaluation", retry_after_s=5), 503, "service_unavailable", "5"),
    (ClientGoneError("x", work="cypher"), 503, "service_unavailable", "1"),
    (NotConfiguredError("x"), 503, "not_configured", None),
    (InvalidTaskError("x"), 422, "invalid_task", None),
    (TaskNotFoundError("x"), 404, "not_found", None),
    (JobUnknownError("x"), 404, "not_found", None),
    (JobAlreadyFinishedError("x"), 409, "conflict", None),
    (JobStorageError("x"), 503, "service_unavailable", None),
    (TooManyJobsError("x", retry_after_s=7), 429, "rate_limited", "7"),
    (ServiceError("x", kind=ServiceErrorKind.FORBIDDEN), 403, "forbidden", None),
]


@pytest.mark.parametrize(("error", "status", "wire_type", "retry_after"), CASES, ids=lambda v: repr(v))
def test_each_service_error_answers_http_by_its_kind(
    error: ServiceError, status: int, wire_type: str, retry_after: str | None
) -> None:
    answer = http_error(error)
    assert (answer.status_code, answer.error_type, answer.message) == (status, wire_type, "x")
    assert answer.headers.get("Retry-After") == retry_after
    assert status_of(error) == status
    assert str(tool_error(error)) == "x"  # MCP: the message, whatever the kind


def test_every_kind_has_an_http_status() -> None:
    statuses = {kind: status_of(ServiceError("x", kind=kind)) for kind in ServiceErrorKind}
    assert statuses[ServiceErrorKind.INTERNAL] == 500 and len(set(statuses.values())) == len(statuses)
