"""The HTTP edge's connection layer, under uvicorn (docs/security.md): `server_config` (used by
`regraph up`) serves the app with `edge_protocol`, uvicorn's HTTP protocol with the edge's limits: a
connection must send a complete request head within `header_timeout_s` (and at most
`max_header_bytes` of it), a request body that sends nothing for `body_idle_timeout_s` is cut off, and
open connections are capped per client address and in all (`ConnectionLedger`): past a cap the
connection that has waited longest for a head is closed, or, when none is idle, the new one is refused.
The request layer, in the app, is `api.edge`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any, cast

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from api.errors import FRAMING_HEADERS, envelope
from api.settings import ApiSettings

logger = logging.getLogger(__name__)


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


class _EdgeHTTP(_Watched):
    """The edge's part of the HTTP protocol class `edge_protocol` builds (first in its bases, so its
    `super()` calls reach uvicorn's protocol). The class built sets `edge_limits` and
    `ledger_of_server`; the attributes of uvicorn's protocol it uses are declared as `Any`."""

    edge_limits: ConnectionLimits
    ledger_of_server: ConnectionLedger
    cycle: Any
    transport: Any
    flow: Any
    loop: Any

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
        refused = self.ledger_of_server.admit(self._edge_client, self)
        if refused is not None:
            self._edge_refused = True
            if refused == "client":
                answer = _raw_answer(
                    429,
                    f"too many connections from this address (at most {self.edge_limits.max_connections_per_client})",
                    (("retry-after", "5"),),
                )
            else:
                answer = _raw_answer(503, "the server has too many connections", (("retry-after", "5"),))
            logger.warning("connection refused", extra={"client": self._edge_client, "cap": refused})
            writer = cast(asyncio.WriteTransport, transport)  # uvloop's are not asyncio's subclasses
            writer.write(answer)
            writer.close()
            return
        super().connection_made(transport)  # type: ignore[misc]
        self._edge_since = time.monotonic()
        self._edge_arm("head", self.edge_limits.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._edge_refused:
            return  # never made: nothing of uvicorn's to undo
        self._edge_disarm()
        self.ledger_of_server.release(self._edge_client, self)
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._edge_refused:
            return
        before = self.cycle
        super().data_received(data)  # type: ignore[misc]
        if self.transport.is_closing():
            return
        if self.cycle is not before:
            self._edge_head_bytes = 0  # a head arrived
        if self._edge_waiting():
            if self.cycle is before:
                self._edge_head_bytes += len(data)
            if self._edge_head_bytes > self.edge_limits.max_header_bytes:
                self._edge_close(431, f"the request head is over {self.edge_limits.max_header_bytes} bytes")
            elif self._edge_kind != "head":
                self._edge_since = time.monotonic()
                self._edge_arm("head", self.edge_limits.header_timeout_s)
        elif self.cycle.more_body:
            self._edge_arm("body", self.edge_limits.body_idle_timeout_s)  # restarted by every byte
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
            self._edge_close(408, f"no complete request head within {self.edge_limits.header_timeout_s:g} s")
        elif kind == "body" and not self._edge_waiting() and self.cycle.more_body:
            if self.flow.read_paused:  # the app is not reading: the client is not the one idle
                self._edge_arm("body", self.edge_limits.body_idle_timeout_s)
            else:
                logger.info("request body idle: connection closed", extra={"client": self._edge_client})
                self.transport.close()

    def _edge_close(self, status: int, message: str) -> None:
        """Answer `status` (only between requests: a response may be under way otherwise) and close."""
        self._edge_disarm()
        self.ledger_of_server.release(self._edge_client, self)
        if self.transport is None or self.transport.is_closing():
            return
        if self._edge_waiting():
            self.transport.write(_raw_answer(status, message))
        self.transport.close()


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
    bases = (_EdgeHTTP, base)
    return type("EdgeHTTPProtocol", bases, {"edge_limits": limits, "ledger_of_server": ledger})


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
