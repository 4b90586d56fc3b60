"""Issue 27, the HTTP edge over real sockets: the API served as `regraph up` serves it (`api.connections.server_config`
under uvicorn, on loopback, over the session's embedded Neo4j).

Idle connections that never finish a request head used to be kept forever (~20,000 of them exhausted the
API's descriptors). Loopback has a whole /8, so one test client binds 127.0.0.2 (the "attacker") while the
normal requests come from 127.0.0.1. Also: the anti-framing headers on every kind of answer, 405's Allow,
and the /ui cookies' Secure flag.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from neo4j import Driver

from api.app import create_app
from api.connections import server_config
from graphdb.connection import Neo4jTarget
from graphdb.embedded import free_port
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api.graph_support import api_settings, clear

HEADER_TIMEOUT_S = 2.0
BODY_IDLE_S = 2.0
PER_CLIENT = 20
TOTAL = 60
MAX_HEAD = 8192
PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "


def serve_edge(app: object, settings: object) -> Iterator[str]:
    """Serve `app` exactly as `regraph up` does (the edge's uvicorn configuration) until closed."""
    port = free_port()
    config = server_config(app, settings, host="127.0.0.1", port=port, lifespan="on")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=5).json().get("startup") == "ready":
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    else:
        server.should_exit = True
        raise TimeoutError("the API did not start")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@pytest.fixture(scope="module")
def admin_token(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> str:
    clear(neo4j_driver, neo4j_target)
    return Neo4jGraphStore(neo4j_driver, neo4j_target.database).create_api_key(
        "edge-admin", Role.ADMIN, actor="bootstrap"
    )[1]


@pytest.fixture(scope="module")
def api_url(
    neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory, admin_token: str
) -> Iterator[str]:
    settings = api_settings(
        neo4j_target,
        Path(tmp_path_factory.mktemp("edge-conn")),
        header_timeout_s=HEADER_TIMEOUT_S,
        body_idle_timeout_s=BODY_IDLE_S,
        max_connections=TOTAL,
        max_connections_per_client=PER_CLIENT,
        max_header_bytes=MAX_HEAD,
    )
    yield from serve_edge(create_app(settings), settings)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def connect_from(source: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    return sock


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has answered and/or closed this connection (without waiting)."""
    sock.setblocking(False)
    try:
        data = sock.recv(65536)
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True
    finally:
        sock.setblocking(True)
    if not data:
        return True
    # An answer (408/429/503/431) comes with `connection: close`: the end follows it.
    assert data.startswith(b"HTTP/1.1 4") or data.startswith(b"HTTP/1.1 503"), data[:100]
    return True


def wait_until(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(predicate())  # type: ignore[operator]


def test_idle_partial_heads_are_capped_per_client_and_closed_in_time(api_url: str, admin_token: str) -> None:
    port = port_of(api_url)
    started = time.monotonic()
    idle = []
    for _ in range(200):
        sock = connect_from("127.0.0.2", port)
        with contextlib.suppress(OSError):  # refused at once
            sock.sendall(PARTIAL_HEAD)
        idle.append(sock)
    try:
        # Past the client's cap the server refuses (429) or closes: at most PER_CLIENT stay open.
        assert wait_until(lambda: sum(not closed_by_server(s) for s in idle) <= PER_CLIENT, 3.0)
        # A normal client is not kept out by them.
        assert httpx.get(f"{api_url}/healthz", timeout=5).status_code == 200
        listed = httpx.get(f"{api_url}/v1/techniques", headers={"X-API-Key": admin_token}, timeout=60)
        assert listed.status_code == 200, listed.text
        # None outlives the head deadline (plus the test's polling slack).
        assert wait_until(lambda: all(closed_by_server(s) for s in idle), HEADER_TIMEOUT_S + 3.0)
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 8.0
    finally:
        for sock in idle:
            sock.close()


def test_a_connection_that_sends_nothing_is_closed(api_url: str) -> None:
    sock = connect_from("127.0.0.1", port_of(api_url))
    with sock:
        assert not closed_by_server(sock)
        sock.settimeout(HEADER_TIMEOUT_S + 3.0)
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert b"x-frame-options: DENY" in answer


def test_idle_connections_give_way_to_new_ones_when_the_server_is_full(
    api_url: str, admin_token: str
) -> None:
    port = port_of(api_url)
    idle = []
    try:
        # Three "clients", each at its cap, fill the server (TOTAL = 3 * PER_CLIENT).
        for source in ("127.0.0.3", "127.0.0.4", "127.0.0.5"):
            for _ in range(PER_CLIENT):
                sock = connect_from(source, port)
                sock.sendall(PARTIAL_HEAD)
                idle.append(sock)
        time.sleep(0.8)  # longer than the least idle time before a connection may be closed for room
        assert sum(not closed_by_server(s) for s in idle) == TOTAL
        for _ in range(3):
            listed = httpx.get(f"{api_url}/v1/techniques", headers={"X-API-Key": admin_token}, timeout=60)
            assert listed.status_code == 200, listed.text
        assert sum(closed_by_server(s) for s in idle) >= 1  # made room by closing idle ones
    finally:
        for sock in idle:
            sock.close()


def test_a_head_over_the_size_limit_is_refused(api_url: str) -> None:
    sock = connect_from("127.0.0.1", port_of(api_url))
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for _ in range(MAX_HEAD // 1000 + 2):
            try:
                sock.sendall(b"X-Filler: " + b"a" * 1000 + b"\r\n")
            except OSError:
                break
            time.sleep(0.01)
        answer = sock.recv(65536)
        assert answer.startswith((b"HTTP/1.1 431", b"HTTP/1.1 400")), answer[:100]


def test_a_request_body_that_stops_arriving_is_cut_off(api_url: str, admin_token: str) -> None:
    sock = connect_from("127.0.0.1", port_of(api_url))
    with sock:
        sock.sendall(
            f"POST /v1/cypher HTTP/1.1\r\nHost: x\r\nX-API-Key: {admin_token}\r\n"
            'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"query": '.encode()
        )
        sock.settimeout(BODY_IDLE_S + 10.0)
        started = time.monotonic()
        try:
            rest = sock.recv(65536)
        except ConnectionResetError:
            rest = b""
        assert rest == b"" or b"HTTP/1.1 4" in rest
        assert time.monotonic() - started < BODY_IDLE_S + 5.0


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/healthz", 200),
        ("GET", "/v1/techniques", 401),
        ("GET", "/v1/no-such-route", 404),
        ("DELETE", "/v1/techniques", 405),
        ("GET", "/ui/login", 200),
        ("GET", "/docs", 200),
    ],
)
def test_every_answer_forbids_framing(api_url: str, method: str, path: str, status: int) -> None:
    response = httpx.request(method, f"{api_url}{path}", timeout=60)
    assert response.status_code == status
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_a_405_allows_every_method_of_the_path(api_url: str, admin_token: str) -> None:
    response = httpx.put(f"{api_url}/v1/techniques", headers={"X-API-Key": admin_token}, json={}, timeout=60)
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["allow"].split(",")} >= {"GET", "POST"}
    assert response.json()["error"]["type"] == "method_not_allowed"


def test_the_workspace_cookies_are_secure_by_default(api_url: str) -> None:
    response = httpx.get(f"{api_url}/ui/login", timeout=60)
    cookie = response.headers["set-cookie"]
    assert "regraph_login=" in cookie and "secure" in cookie.lower(), cookie
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
