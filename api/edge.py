"""The HTTP edge: what every connection and request passes before a route reads its body (docs/security.md).

Two layers. Under uvicorn (`server_config`, used by `regraph up`), `edge_protocol` wraps uvicorn's HTTP
protocol: a connection must send a complete request head within `header_timeout_s` (and at most
`max_header_bytes` of it), a request body that sends nothing for `body_idle_timeout_s` is cut off, and
open connections are capped per client address and in all (`ConnectionLedger`): past a cap the
connection that has waited longest for a head is closed, or, when none is idle, the new one is refused.

In the app, `ResponseHeaders` puts the anti-framing headers on every response, and `RequestGate` (a
plain ASGI middleware), for a request that may carry a body (POST, PUT, PATCH) to the API's `/v1/`
routes, first checks the API key (401 without a valid one, unless anonymous reading is on), so no
body is read for an unauthenticated caller; then it enforces the body limit: a declared
Content-Length over the limit is refused at once (413), and a body without one (chunked) is counted
while it is read and refused as soon as it passes the limit, before anything parses it. The import
uploads have a larger limit of their own, for admins only (checked before the body).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import uvicorn
from fastapi import FastAPI, HTTPException
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from api.errors import FRAMING_HEADERS, ServiceUnavailableError, envelope
from api.settings import ApiSettings
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


# -- the connection layer, under uvicorn ----------------------------------------------------------------


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold of the server, and how many connections there may be."""

    header_timeout_s: float
    body_idle_timeout_s: float
    max_header_bytes: int
    max_connections: int
    max_connections_per_client: int

    @classmethod
    def of(cls, settings: ApiSettings) -> ConnectionLimits:
        """The limits `settings` name."""
        return cls(
            header_timeout_s=settings.header_timeout_s,
            body_idle_timeout_s=settings.body_idle_timeout_s,
            max_header_bytes=settings.max_header_bytes,
            max_connections=settings.max_connections,
            max_connections_per_client=settings.max_connections_per_client,
        )


def client_key(host: str | None) -> str:
    """Whose connection this is, for the per-client cap: the peer's address; for IPv6 its /64 (one
    subscriber's usual allocation, so that an attacker cannot rotate through addresses)."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


class _Watched:
    """What the ledger needs of a connection (implemented by `edge_protocol`'s class)."""

    def waiting_since(self) -> float | None:
        """Since when (monotonic) it has waited for a request head, or None while a request runs."""
        raise NotImplementedError

    def evict(self) -> None:
        """Close it (408): it waited for a head while the server is full."""
        raise NotImplementedError


class ConnectionLedger:
    """The open connections by client, and who gets in when a cap is reached.

    Past a cap (the client's or the total), the connection that has waited longest for a request
    head (at least `min_idle_s`) is closed to make room; when none has, the new connection is refused.
    So idle connections cannot keep out clients that send requests, and one client's connections
    never exceed its share. Runs on the event loop only (no locking).
    """

    def __init__(self, max_total: int, max_per_client: int, *, min_idle_s: float = 1.0) -> None:
        """Allow `max_total` connections, `max_per_client` of them from one client."""
        self.max_total = max_total
        self.max_per_client = max_per_client
        self.min_idle_s = min_idle_s
        self._by_client: dict[str, set[_Watched]] = {}
        self._total = 0

    @property
    def total(self) -> int:
        """Connections open now."""
        return self._total

    def admit(self, client: str, connection: _Watched) -> str | None:
        """Record `connection` of `client`; None when admitted, else which cap refused it."""
        peers = self._by_client.get(client, set())
        if len(peers) >= self.max_per_client and not self._evict_idlest(peers):
            return "client"
        if self._total >= self.max_total and not self._evict_idlest(
            c for group in self._by_client.values() for c in group
        ):
            return "total"
        self._by_client.setdefault(client, set()).add(connection)
        self._total += 1
        return None

    def release(self, client: str, connection: _Watched) -> None:
        """Forget `connection` (closed); nothing happens for one already forgotten."""
        peers = self._by_client.get(client)
        if peers is None or connection not in peers:
            return
        peers.discard(connection)
        self._total -= 1
        if not peers:
            del self._by_client[client]

    def _evict_idlest(self, candidates: Any) -> bool:
        now = time.monotonic()
        idlest: _Watched | None = None
        oldest = now - self.min_idle_s
        for connection in candidates:
            since = connection.waiting_since()
            if since is not None and since <= oldest:
                idlest, oldest = connection, since
        if idlest is None:
            return False
        idlest.evict()  # releases it from this ledger at once
        return True


def _raw_answer(status: int, message: str, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A whole HTTP/1.1 response in the error envelope, for the protocol to write before closing."""
    body = bytes(envelope(status, message).body)
    reasons = {408: "Request Timeout", 429: "Too Many Requests", 431: "Request Header Fields Too Large"}
    head = [f"HTTP/1.1 {status} {reasons.get(status, 'Service Unavailable')}"]
    head += [f"{k}: {v}" for k, v in (("content-type", "application/json"), *FRAMING_HEADERS, *extra)]
    head += [f"content-length: {len(body)}", "connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def edge_protocol(
    limits: ConnectionLimits, base: type[asyncio.Protocol] = AutoHTTPProtocol
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`base`: httptools, or h11 without it) with the edge's limits.

    uvicorn bounds only the idle time between requests (`timeout_keep_alive`, reset by any byte): a
    client that trickles a request head, or sends none, holds its connection (a file descriptor)
    forever. This class adds a deadline for the whole head (from the connection or the end of the
    previous response's wait, not reset by bytes), a cap on its size, an idle limit while a body is
    read (paused while the app does not read), and the connection caps of one `ConnectionLedger`.
    It relies only on what both of uvicorn's HTTP/1.1 protocols keep: `cycle` (a request whose head
    has arrived, with `more_body` and `response_complete`), `transport` and `flow`.
    """
    ledger = ConnectionLedger(
        limits.max_connections,
        limits.max_connections_per_client,
        min_idle_s=min(1.0, limits.header_timeout_s / 4),
    )

    class EdgeHTTPProtocol(base, _Watched):  # type: ignore[valid-type, misc]
        ledger_of_server = ledger

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._edge_client = "unknown"
            self._edge_refused = False
            self._edge_timer: asyncio.TimerHandle | None = None
            self._edge_kind: str | None = None
            self._edge_since: float | None = None
            self._edge_head_bytes = 0

        # -- what the ledger asks ---------------------------------------------------------------

        def waiting_since(self) -> float | None:
            return self._edge_since if self._edge_waiting() else None

        def evict(self) -> None:
            self._edge_close(408, "the server is full and this connection sent no request")

        # -- uvicorn's protocol -----------------------------------------------------------------

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            peer = transport.get_extra_info("peername")
            self._edge_client = client_key(str(peer[0]) if isinstance(peer, tuple | list) and peer else None)
            refused = ledger.admit(self._edge_client, self)
            if refused is not None:
                self._edge_refused = True
                if refused == "client":
                    answer = _raw_answer(
                        429,
                        f"too many connections from this address (at most {limits.max_connections_per_client})",
                        (("retry-after", "5"),),
                    )
                else:
                    answer = _raw_answer(503, "the server has too many connections", (("retry-after", "5"),))
                logger.warning("connection refused", extra={"client": self._edge_client, "cap": refused})
                writer = cast(asyncio.WriteTransport, transport)  # uvloop's are not asyncio's subclasses
                writer.write(answer)
                writer.close()
                return
            super().connection_made(transport)
            self._edge_since = time.monotonic()
            self._edge_arm("head", limits.header_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._edge_refused:
                return  # never made: nothing of uvicorn's to undo
            self._edge_disarm()
            ledger.release(self._edge_client, self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._edge_refused:
                return
            before = self.cycle
            super().data_received(data)
            if self.transport.is_closing():
                return
            if self.cycle is not before:
                self._edge_head_bytes = 0  # a head arrived
            if self._edge_waiting():
                if self.cycle is before:
                    self._edge_head_bytes += len(data)
                if self._edge_head_bytes > limits.max_header_bytes:
                    self._edge_close(431, f"the request head is over {limits.max_header_bytes} bytes")
                elif self._edge_kind != "head":
                    self._edge_since = time.monotonic()
                    self._edge_arm("head", limits.header_timeout_s)
            elif self.cycle.more_body:
                self._edge_arm("body", limits.body_idle_timeout_s)  # restarted by every byte
            else:
                self._edge_disarm()

        # -- the edge's own ---------------------------------------------------------------------

        def _edge_waiting(self) -> bool:
            """Whether the connection waits for a request head (no request under way)."""
            return self.cycle is None or bool(self.cycle.response_complete)

        def _edge_arm(self, kind: str, delay_s: float) -> None:
            self._edge_disarm()
            self._edge_kind = kind
            self._edge_timer = self.loop.call_later(delay_s, self._edge_expired)

        def _edge_disarm(self) -> None:
            if self._edge_timer is not None:
                self._edge_timer.cancel()
            self._edge_timer, self._edge_kind = None, None

        def _edge_expired(self) -> None:
            kind, self._edge_timer, self._edge_kind = self._edge_kind, None, None
            if self.transport is None or self.transport.is_closing():
                return
            if kind == "head" and self._edge_waiting():
                self._edge_close(408, f"no complete request head within {limits.header_timeout_s:g} s")
            elif kind == "body" and not self._edge_waiting() and self.cycle.more_body:
                if self.flow.read_paused:  # the app is not reading: the client is not the one idle
                    self._edge_arm("body", limits.body_idle_timeout_s)
                else:
                    logger.info("request body idle: connection closed", extra={"client": self._edge_client})
                    self.transport.close()

        def _edge_close(self, status: int, message: str) -> None:
            """Answer `status` (only between requests: a response may be under way otherwise) and close."""
            self._edge_disarm()
            ledger.release(self._edge_client, self)
            if self.transport is None or self.transport.is_closing():
                return
            if self._edge_waiting():
                self.transport.write(_raw_answer(status, message))
            self.transport.close()

    return EdgeHTTPProtocol


def raise_open_files_limit(wanted: int) -> int:
    """Raise this process's soft limit of open files towards `wanted` (up to the hard limit); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


# Descriptors kept for everything but client connections: the Neo4j pool (100), logs, files, pipes.
_DESCRIPTOR_RESERVE = 512


def server_config(app: ASGIApp, settings: ApiSettings, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration that serves `app` with the edge's limits (`edge_protocol`).

    Raises the open-files limit to fit `max_connections` plus a reserve; where the hard limit is
    lower, the connection cap is lowered to fit (logged), so that connections can never take the
    descriptors the API needs for its database and files.
    """
    limits = ConnectionLimits.of(settings)
    available = raise_open_files_limit(settings.max_connections + _DESCRIPTOR_RESERVE) - _DESCRIPTOR_RESERVE
    if available < limits.max_connections:
        logger.warning(
            "connection cap lowered to fit the open-files limit",
            extra={"max_connections": max(available, 8), "asked": limits.max_connections},
        )
        limits = ConnectionLimits(
            **{**limits.__dict__, "max_connections": max(available, 8)},
        )
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_config": None,
        "http": edge_protocol(limits),
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        **overrides,
    }
    return uvicorn.Config(app, **options)
