"""The HTTP edge: what every request passes before a route reads its body (docs/security.md).

`RequestGate` is a plain ASGI middleware. For a request that may carry a body (POST, PUT, PATCH) to
the API's `/v1/` routes it first checks the API key (401 without a valid one, unless anonymous reading
is on), so no body is read for an unauthenticated caller; then it enforces the body limit: a declared
Content-Length over the limit is refused at once (413), and a body without one (chunked) is counted
while it is read and refused as soon as it passes the limit, before anything parses it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fastapi import FastAPI, HTTPException
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import ServiceUnavailableError, envelope

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_GATED_PREFIX = "/v1/"

# (the app's state, token) -> whether the key is live. `ServiceUnavailableError` means the key store did
# not answer (the gate answers 503 at once, rather than the route asking it again); any other exception
# means "cannot tell now" (the route answers).
TokenCheck = Callable[[Any, str], bool]


def _token(headers: Headers) -> str | None:
    key = headers.get("x-api-key")
    if key:
        return key
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


class RequestGate:
    """Authentication before the body, and the body limit while it is read (chunked included)."""

    def __init__(
        self, app: ASGIApp, *, max_body_bytes: int, anonymous_read: bool, check_token: TokenCheck
    ) -> None:
        """Gate `app`: bodies over `max_body_bytes` get 413; keys for which `check_token` is False get 401."""
        self.app = app
        self.max_body_bytes = max_body_bytes
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
        limit = self.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > limit):
            await self._answer(send, 413, f"request body over {limit} bytes (or an invalid Content-Length)")
            return
        if str(scope.get("path", "")).startswith(_GATED_PREFIX):
            try:
                refusal = await self._refusal(scope, headers)
            except ServiceUnavailableError as e:
                await self._answer(send, 503, e.message)
                return
            if refusal is not None:
                await self._answer(send, 401, refusal)
                return
        await self.app(scope, self._limited(receive, limit), send)

    async def _refusal(self, scope: Scope, headers: Headers) -> str | None:
        """Why this request is refused before its body is read, or None."""
        token = _token(headers)
        if token is None:
            if self.anonymous_read:
                return None  # the route decides (anonymous callers only read)
            return "an API key is required: send X-API-Key or Authorization: Bearer"
        state = getattr(scope["app"].state, "regraph", None) if "app" in scope else None
        if state is None:
            return None  # starting or stopping: the route answers 503
        try:
            live = await anyio.to_thread.run_sync(self.check_token, state, token)
        except ServiceUnavailableError:
            raise
        except Exception:  # the store cannot tell now: the route gives the precise answer
            return None
        return None if live else "the API key is not valid (unknown or revoked)"

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
