"""The API answers from the moment it listens: start-up runs in the background (issue 15: `/healthz`
refused connections for the 17-28 s the embedded Neo4j took to start and migrate).

The API is pointed at a Neo4j address where nothing listens yet; a real TCP forwarder to the session's
Neo4j opens there later, so the start-up waits for the graph as it would for a server still booting.
Until then liveness answers, readiness and every route say "starting" with 503 and `Retry-After`;
after, readiness and the routes answer as usual. A start-up that fails ends the process (exit 3).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from api.startup import STARTUP_FAILURE_EXIT_STATUS
from graphdb.connection import Neo4jTarget
from graphdb.embedded import free_port
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.support.servers import serve_in_thread

NO_HANG_S = 30.0  # an answer must come at all; how fast is measured by bench/probes/startup_time.py


class TcpForwarder:
    """Accepts on a loopback port and relays each connection to `upstream` (host, port), both ways."""

    def __init__(self, port: int, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", port))
        self.sockets: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self.sockets += [client, server]
            self._spawn(self._pump, client, server)
            self._spawn(self._pump, server, client)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        # Closing a listening socket does not wake a thread blocked in accept() on Linux (it waited out
        # its join's 10 s); shutting it down does, with EINVAL.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._lock:
            sockets, threads = list(self.sockets), list(self.threads)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for thread in threads:
            thread.join(timeout=10)


@pytest.fixture()
def late_port() -> int:
    return free_port()


def upstream_of(target: Neo4jTarget) -> tuple[str, int]:
    host, _, port = target.uri.removeprefix("bolt://").rpartition(":")
    return host, int(port)


def test_health_answers_while_neo4j_is_not_reachable_yet_and_readiness_follows(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget, late_port: int, tmp_path: Path
) -> None:
    _, token = Neo4jGraphStore(neo4j_driver, neo4j_target.database).create_api_key(
        "startup-reader", Role.READER, actor="test"
    )
    reader = {"X-API-Key": token}
    settings = ApiSettings(
        neo4j_uri=f"bolt://127.0.0.1:{late_port}",  # nothing listens there yet
        neo4j_password=SecretStr(neo4j_target.password),
        data_dir=tmp_path,
        log_format="text",
        seed_graph=None,
        preload_retrieval=False,
    )
    forwarders: list[TcpForwarder] = []  # closed once the API has stopped (it closes its connections)
    try:
        # Without waiting for the start-up: the block begins as soon as the port is open.
        with serve_in_thread(create_app(settings), wait_for_startup=False, startup_timeout_s=20) as url:
            check_starting(url, late_port, reader)
            forwarders.append(TcpForwarder(late_port, upstream_of(neo4j_target)))  # Neo4j "comes up"
            check_ready(url, reader)
    finally:
        for forwarder in forwarders:
            forwarder.close()


def check_starting(url: str, late_port: int, reader: dict[str, str]) -> None:
    """Liveness answers; readiness and every other route answer 503 "starting" with Retry-After."""
    alive = httpx.get(f"{url}/healthz", timeout=NO_HANG_S)
    assert alive.status_code == 200, alive.text
    assert alive.json()["status"] == "ok"
    assert alive.json()["startup"].startswith(f"starting: reaching Neo4j at bolt://127.0.0.1:{late_port}")

    ready = httpx.get(f"{url}/readyz", timeout=NO_HANG_S)
    assert ready.status_code == 503, ready.text
    assert ready.json()["error"]["message"].startswith("starting: reaching Neo4j")
    assert ready.headers["Retry-After"] == "5"

    # Every other route, with or without a body, answers at once in the envelope.
    for response in (
        httpx.get(f"{url}/v1/techniques", headers=reader, timeout=NO_HANG_S),
        httpx.post(f"{url}/v1/cypher", headers=reader, json={"query": "RETURN 1"}, timeout=NO_HANG_S),
        httpx.get(f"{url}/ui/", timeout=NO_HANG_S),
    ):
        assert response.status_code == 503, (response.request.url, response.text)
        error = response.json()["error"]
        assert error["type"] == "service_unavailable"
        assert "the service is starting" in error["message"]
        assert response.headers["Retry-After"] == "5"
    # The API description is served while starting.
    assert httpx.get(f"{url}/openapi.json", timeout=NO_HANG_S).status_code == 200


def check_ready(url: str, reader: dict[str, str]) -> None:
    """Readiness turns 200 once the start-up has reached Neo4j; the routes then answer as usual."""
    deadline = time.monotonic() + 120
    while (ready := httpx.get(f"{url}/readyz", timeout=NO_HANG_S)).status_code != 200:
        assert ready.status_code == 503, ready.text
        assert time.monotonic() < deadline, ready.text
        time.sleep(0.2)
    assert ready.json()["neo4j"] == "ready" and ready.json()["schema_up_to_date"] is True
    assert httpx.get(f"{url}/healthz", timeout=NO_HANG_S).json() == {"status": "ok", "startup": "ready"}
    techniques = httpx.get(f"{url}/v1/techniques", headers=reader, timeout=NO_HANG_S)
    assert techniques.status_code == 200, techniques.text
    cypher = httpx.post(
        f"{url}/v1/cypher", headers=reader, json={"query": "RETURN 1 AS one"}, timeout=NO_HANG_S
    )
    assert cypher.status_code == 200, cypher.text


def test_a_failed_start_up_is_logged_and_ends_the_process_with_status_3(
    neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    # A user Neo4j does not know: the credentials are refused at once (the real user is not locked out).
    port = free_port()
    env = {
        **os.environ,
        "REGRAPH_NEO4J_URI": neo4j_target.uri,
        "REGRAPH_NEO4J_USER": "no-such-user",
        "REGRAPH_NEO4J_PASSWORD": "wrong",
        "REGRAPH_DATA_DIR": str(tmp_path),
        "REGRAPH_SEED_GRAPH": "none",
        "REGRAPH_PRELOAD_RETRIEVAL": "false",
        "REGRAPH_LOG_FORMAT": "text",
    }
    command = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory", "--port", str(port)]
    log = tmp_path / "api.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            status = process.wait(timeout=180)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    text = log.read_text()
    assert status == STARTUP_FAILURE_EXIT_STATUS, text
    assert "start-up failed" in text and "refused the credentials" in text, text
