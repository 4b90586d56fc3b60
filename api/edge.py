"""The HTTP edge: what every connection and request passes before a route reads its body (docs/security.md).

Two layers. Under uvicorn, the connection layer (`api.connections`: header and body timeouts,
connection caps). In the app, `ResponseHeaders` puts the anti-framing headers on every response, and `RequestGate` (a
plain ASGI middleware), for a request that may carry a body (POST, PUT, PATCH) to the API's `/v1/`
routes, first checks the API key (401 without a valid one, unless anonymous reading is on), so no
body is read for an unauthenticated caller; then it enforces the body limit: a declared
Content-Length over the limit is refused at once (413), and a body without one (chunked) is counted
while it is read and refused as soon as it passes the limit, before anything parses it. The import
uploads have a larger limit of their own, for admins only (checked before the body).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fastapi import FastAPI, HTTPException
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import FRAMING_HEADERS, ServiceUnavailableError, envelope
from api.ui.session import SESSION_COOKIE
from graphdb.models import Role

logger = logging.getLogger(__name__)

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_GATED_PREFIX = "/v1/"
API_IMPORT_UPLOAD = "/v1/graph/import/upload"
UI_IMPORT = "/ui/admin/import"
_UI_PREFIX = "/ui/"

# (the app's state, token) -> the role of the live key, or None for an unknown or revoked one.
# `ServiceUnavailableError` means the key store did not answer (the gate answers 503 at once, rather
# than the route asking it again); any other exception means "cannot tell now" (the route answers).
TokenCheck = Callable[[Any, str], Role | None]


def _token(headers: Headers) -> str | None:
    key = headers.get("x-api-key")
    if key:
        return key
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


class ResponseHeaders:
    """The anti-framing headers (`FRAMING_HEADERS`) on every response, errors and 503s included."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap `app` (outermost, so that every answer passes here)."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = with_framing_headers(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, send_with_headers)


def with_framing_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` with the anti-framing ones added (a policy of the response's own gains frame-ancestors)."""
    names = {name.lower() for name, _ in headers}
    out = []
    for name, value in headers:
        if name.lower() == b"content-security-policy" and b"frame-ancestors" not in value:
            value = value.rstrip(b"; ") + b"; frame-ancestors 'none'"
        out.append((name, value))
    out += [(k.encode(), v.encode()) for k, v in FRAMING_HEADERS if k.encode() not in names]
    return out


class RequestGate:
    """Authentication before the body, and the body limit while it is read (chunked included)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        max_import_bytes: int,
        anonymous_read: bool,
        check_token: TokenCheck,
    ) -> None:
        """Gate `app`: bodies over `max_body_bytes` get 413 (`max_import_bytes` for an admin's import
        upload); keys for which `check_token` gives no role get 401."""
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_import_bytes = max_import_bytes
        self.anonymous_read = anonymous_read
        self.check_token = check_token

    async def _answer(self, send: Send, status: int, message: str) -> None:
        response = envelope(status, message)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in response.headers.items()],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path = str(scope.get("path", ""))
        try:
            limit, refusal = await self._limit_and_refusal(scope, headers, path)
        except ServiceUnavailableError as e:
            await self._answer(send, 503, e.message)
            return
        if refusal is not None:
            await self._answer(send, *refusal)
            return
        declared = headers.get("content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > limit):
            if path.startswith(_UI_PREFIX) and declared.strip().isdigit():
                await self._too_large_page(receive, send, path, int(declared), limit)
                return
            await self._answer(send, 413, f"request body over {limit} bytes (or an invalid Content-Length)")
            return
        await self.app(scope, self._limited(receive, limit), send)

    async def _limit_and_refusal(
        self, scope: Scope, headers: Headers, path: str
    ) -> tuple[int, tuple[int, str] | None]:
        """This request's body limit, and why it is refused before its body is read (or None)."""
        if path == API_IMPORT_UPLOAD:
            role = await self._role(scope, _token(headers))
            if role is None:
                return self.max_body_bytes, (401, "an admin API key is required: send X-API-Key")
            if role is not Role.ADMIN:
                return self.max_body_bytes, (403, f"importing needs the admin role; this key is {role.value}")
            return self.max_import_bytes, None
        if path == UI_IMPORT:
            # The workspace's import form: the larger limit only for a signed-in admin's session.
            session = _ui_session(scope, headers)
            if session is not None and await self._role(scope, session.token) is Role.ADMIN:
                return self.max_import_bytes, None
            return self.max_body_bytes, None
        if path.startswith(_GATED_PREFIX):
            return self.max_body_bytes, await self._refusal(scope, headers)
        return self.max_body_bytes, None

    async def _role(self, scope: Scope, token: str | None) -> Role | None:
        """The role of a live key `token` (None: no token, unknown, revoked, or cannot tell now)."""
        state = getattr(scope["app"].state, "regraph", None) if "app" in scope else None
        if token is None or state is None:
            return None
        try:
            return await anyio.to_thread.run_sync(self.check_token, state, token)
        except ServiceUnavailableError:
            raise
        except Exception:  # the store cannot tell now: refused here, the caller may retry
            return None

    async def _refusal(self, scope: Scope, headers: Headers) -> tuple[int, str] | None:
        """Why this `/v1/` request is refused before its body is read, or None."""
        token = _token(headers)
        if token is None:
            if self.anonymous_read:
                return None  # the route decides (anonymous callers only read)
            return 401, "an API key is required: send X-API-Key or Authorization: Bearer"
        state = getattr(scope["app"].state, "regraph", None) if "app" in scope else None
        if state is None:
            return None  # starting or stopping: the route answers 503
        try:
            role = await anyio.to_thread.run_sync(self.check_token, state, token)
        except ServiceUnavailableError:
            raise
        except Exception:  # the store cannot tell now: the route gives the precise answer
            return None
        return None if role is not None else (401, "the API key is not valid (unknown or revoked)")

    async def _too_large_page(
        self, receive: Receive, send: Send, path: str, declared: int, limit: int
    ) -> None:
        """A page that says the upload is too large. A browser that is still sending when the server
        answers and closes shows a reset instead of the answer, so the body is read and dropped first
        (up to twice the limit; past that the connection is closed at once)."""
        if declared <= 2 * limit:
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the browser went away
                more = bool(message.get("more_body", False))
        back = "/ui/admin" if path == UI_IMPORT else "/ui"
        what = "an import" if path == UI_IMPORT else "a form"
        body = (
            "<!doctype html><html><head><meta charset=utf-8><title>Too large</title></head><body>"
            f"<h1>That file is too large</h1><p>The upload was {declared:,} bytes; {what} here takes at "
            f"most {limit:,} bytes (REGRAPH_MAX_IMPORT_BYTES for imports by an admin, "
            f"REGRAPH_MAX_REQUEST_BYTES otherwise). Nothing was changed.</p>"
            f'<p><a href="{back}">Back</a></p></body></html>'
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    def _limited(receive: Receive, limit: int) -> Callable[[], Awaitable[Message]]:
        received = 0

        async def receive_within_limit() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # FastAPI re-raises an HTTPException from reading the body; the envelope handler answers.
                    raise HTTPException(413, f"request body over {limit} bytes")
            return message

        return receive_within_limit


def _ui_session(scope: Scope, headers: Headers) -> Any:
    """The workspace session the request's cookie names, or None."""
    sessions = getattr(scope["app"].state, "ui_sessions", None) if "app" in scope else None
    if sessions is None:
        return None
    return sessions.get(cookie_parser(headers.get("cookie", "")).get(SESSION_COOKIE))


def document_edge_responses(app: FastAPI) -> None:
    """Declare in the OpenAPI document what the edge itself answers on every route with a body: 413
    (the gate's limit), 400 (a body that cannot be parsed as its media type: FastAPI answers that before
    validation) and, on `/v1/` routes, 401 (the gate's key check); the envelope, as for the routes' own
    errors."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                if not isinstance(operation, dict) or "requestBody" not in operation:
                    continue
                answers = operation.setdefault("responses", {})
                answers.setdefault("413", _envelope_response("payload too large"))
                answers.setdefault("400", _envelope_response("bad request (a body that cannot be parsed)"))
                if path.startswith(_GATED_PREFIX):
                    answers.setdefault("401", _envelope_response("unauthorized"))
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _envelope_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
    }
