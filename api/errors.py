"""The API's exceptions and the one JSON error envelope every non-2xx response uses.

`{"error": {"message": str, "type": str, "code": int}}` — for our own errors, FastAPI's HTTP errors,
request validation (422) and anything unexpected (500, with the detail kept in the log only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

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


class ApiError(Exception):
    """Root of the API's own errors; each subclass fixes its status code and type."""

    status_code = 500
    error_type = "internal_error"

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})  # sent with the envelope (e.g. 429's Retry-After)


class BadRequestError(ApiError):
    """The request is well-formed JSON but asks for something impossible."""

    status_code = 400
    error_type = "bad_request"


class UnauthorizedError(ApiError):
    """No or an unknown API key."""

    status_code = 401
    error_type = "unauthorized"


class ForbiddenError(ApiError):
    """The API key's role does not allow this."""

    status_code = 403
    error_type = "forbidden"


class NotFoundError(ApiError):
    """The named resource does not exist."""

    status_code = 404
    error_type = "not_found"


class ConflictError(ApiError):
    """The request conflicts with the current state."""

    status_code = 409
    error_type = "conflict"


class UnprocessableError(ApiError):
    """The request is well-formed but its content is refused (a field's value, a file's)."""

    status_code = 422
    error_type = "validation_error"


class PayloadTooLargeError(ApiError):
    """The request body exceeds the configured limit."""

    status_code = 413
    error_type = "payload_too_large"


class ServiceUnavailableError(ApiError):
    """A dependency (Neo4j, the executor, a model) is not available."""

    status_code = 503
    error_type = "service_unavailable"


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

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return envelope(exc.status_code, exc.message, exc.error_type, exc.headers)

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


ServiceError = TypeVar("ServiceError", bound=Exception)


def translate_errors(
    app: FastAPI, error_type: type[ServiceError], to_api_error: Callable[[ServiceError], ApiError]
) -> None:
    """Answer every `error_type` a route lets through as the `ApiError` that `to_api_error` makes of it.

    Services raise their own errors (graph, optimize jobs); routes let them through and this one
    handler per family gives each its status in the envelope.
    """

    async def _translated(_: Request, exc: Exception) -> JSONResponse:
        error = to_api_error(exc)  # type: ignore[arg-type]  # registered for error_type only
        return envelope(error.status_code, error.message, error.error_type, error.headers)

    app.add_exception_handler(error_type, _translated)


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
