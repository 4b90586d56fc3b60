"""The API's one error root (`ServiceError`, with a `kind`) and the one JSON error envelope every non-2xx
response uses.

Services and faces raise `ServiceError`s; each face maps their kinds once: HTTP in the app-wide handler
(`install_error_handlers`, through `http_error`), the /ui pages through `status_of`, MCP in
`api.mcp.server.tool_error`. The envelope is `{"error": {"message": str, "type": str, "code": int}}` —
for our own errors, FastAPI's HTTP errors, request validation (422) and anything unexpected (500, with
the detail kept in the log only).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

logger = logging.getLogger(__name__)

FRAMING_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", "frame-ancestors 'none'"),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
)
"""Sent on every response (`api.edge.ResponseHeaders`): no page of ours may be framed by another site."""


class ErrorBody(BaseModel):
    message: str
    type: str
    code: int


class ErrorEnvelope(BaseModel):
    """The body of every non-2xx response."""

    error: ErrorBody


class ServiceErrorKind(StrEnum):
    """What went wrong, in the terms every face maps: HTTP to a status, MCP to a tool error, /ui to a page."""

    INVALID = "invalid"  # the request asks for something impossible
    UNAUTHORIZED = "unauthorized"  # no key, or an unknown or revoked one
    FORBIDDEN = "forbidden"  # the key's role does not allow this
    NOT_FOUND = "not_found"  # the named thing does not exist (or is not the caller's)
    CONFLICT = "conflict"  # it conflicts with the current state
    TOO_LARGE = "too_large"  # the body exceeds its limit
    UNPROCESSABLE = "unprocessable"  # well-formed, but a field's or a file's content is refused
    TOO_MANY = "too_many"  # the key already runs as many of these as it may
    UNAVAILABLE = "unavailable"  # a dependency (Neo4j, the executor, a model, a setting) is not there
    INTERNAL = "internal"  # a fault of ours


class ServiceError(Exception):
    """Root of the API's own errors, raised by its services and its faces alike.

    `kind` says what went wrong (each face maps kinds, never classes); `error_type` names the error on
    the wire when the kind's own name is too coarse (e.g. ``cypher_refused``); `retry_after_s` says when
    trying again makes sense. Families (the graph service's, the job service's, the limiter's) subclass it
    and fix their kind as a class attribute; a one-off error is ``ServiceError(message, kind=...)``.
    """

    kind: ServiceErrorKind = ServiceErrorKind.INTERNAL
    error_type: str | None = None
    retry_after_s: int | None = None

    def __init__(
        self,
        message: str,
        *,
        kind: ServiceErrorKind | None = None,
        error_type: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind
        if error_type is not None:
            self.error_type = error_type
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s


class ServiceUnavailableError(ServiceError):
    """A dependency (Neo4j, the executor, a model) is not available (the HTTP edge catches this one)."""

    kind = ServiceErrorKind.UNAVAILABLE


# -- the HTTP face's one mapping ----------------------------------------------------------------------

_HTTP: dict[ServiceErrorKind, tuple[int, str]] = {
    ServiceErrorKind.INVALID: (400, "bad_request"),
    ServiceErrorKind.UNAUTHORIZED: (401, "unauthorized"),
    ServiceErrorKind.FORBIDDEN: (403, "forbidden"),
    ServiceErrorKind.NOT_FOUND: (404, "not_found"),
    ServiceErrorKind.CONFLICT: (409, "conflict"),
    ServiceErrorKind.TOO_LARGE: (413, "payload_too_large"),
    ServiceErrorKind.UNPROCESSABLE: (422, "validation_error"),
    ServiceErrorKind.TOO_MANY: (429, "rate_limited"),
    ServiceErrorKind.UNAVAILABLE: (503, "service_unavailable"),
    ServiceErrorKind.INTERNAL: (500, "internal_error"),
}


@dataclass(frozen=True)
class HttpError:
    """A service error as HTTP answers it: status, the envelope's type and message, extra headers."""

    status_code: int
    error_type: str
    message: str
    headers: dict[str, str]


def http_error(error: ServiceError) -> HttpError:
    """The HTTP answer to `error` (the app-wide handler's, and the /ui pages' through `status_of`)."""
    status, default_type = _HTTP[error.kind]
    retry_after = error.retry_after_s
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return HttpError(status, error.error_type or default_type, error.message, headers)


def status_of(error: ServiceError) -> int:
    """The HTTP status of `error` (for faces that answer pages rather than the envelope: /ui)."""
    return _HTTP[error.kind][0]


_TYPE_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "service_unavailable",
}


def envelope(
    status: int, message: str, error_type: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A JSON response in the error envelope (with `headers`, e.g. 405's Allow)."""
    body = ErrorEnvelope(
        error=ErrorBody(message=message, type=error_type or _TYPE_BY_STATUS.get(status, "error"), code=status)
    )
    return JSONResponse(status_code=status, content=body.model_dump(), headers=dict(headers or {}))


def _format_validation(errors: list[Any]) -> str:
    parts = []
    for err in errors:
        location = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{location or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Route every failure through the envelope."""

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        answer = http_error(exc)
        return envelope(answer.status_code, answer.message, answer.error_type, answer.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route that matched the path only; a path that
            # several routes serve (GET and POST /v1/techniques) allows all of theirs.
            headers["Allow"] = ", ".join(allowed_methods(request)) or headers.get("Allow", "")
        return envelope(exc.status_code, str(exc.detail), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return envelope(422, _format_validation(list(exc.errors())), "validation_error")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", extra={"path": request.url.path})
        # Answered by Starlette's outermost middleware, outside `ResponseHeaders`: the headers are set here.
        return envelope(500, "internal error; see the service log", "internal_error", dict(FRAMING_HEADERS))


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method that some route of the app serves at this request's path, sorted (asked of the
    routes themselves, so that routers included in routers answer too)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorEnvelope, "description": kind.replace("_", " ")}
    for status, kind in [
        (400, "bad_request"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "not_found"),
        (422, "validation_error"),
        (503, "service_unavailable"),
    ]
}
"""Declared on routes so that the OpenAPI document shows the envelope for each error status."""

_EXTRA_RESPONSES: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorEnvelope, "description": "conflict"},
    413: {"model": ErrorEnvelope, "description": "payload too large"},
    429: {
        "model": ErrorEnvelope,
        "description": "too many requests of this key at once; retry after the Retry-After header's seconds",
        "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
    },
}


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a route can give (each in the envelope), for a truthful OpenAPI document:
    401, 422 and 503, which every authenticated route can give, and ``codes``."""
    table = {**ERROR_RESPONSES, **_EXTRA_RESPONSES}
    return {code: table[code] for code in sorted({401, 422, 503, *codes})}
