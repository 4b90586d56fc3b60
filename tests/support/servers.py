"""Run a real ASGI app under uvicorn on a loopback port, in a background thread, for tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import uvicorn

from graphdb.embedded import free_port


def _start_up_state(url: str) -> str | None:
    """The API's start-up phase from its `/healthz` ("starting: ...", "ready", "failed: ..."), or None
    for an app whose liveness does not report one (the executor's: started once it listens)."""
    try:
        body = httpx.get(f"{url}/healthz", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return "starting: not answering yet"
    phase = body.get("startup") if isinstance(body, dict) else None
    return phase if isinstance(phase, str) else None


@contextmanager
def serve_in_thread(
    app: Any, *, startup_timeout_s: float = 120.0, port: int | None = None, wait_for_startup: bool = True
) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 at `port` (default: a free one) until the block ends; yields the base URL.

    The API listens before its start-up (Neo4j, migrations, models) has finished (api/startup.py):
    with `wait_for_startup` the block begins once `/healthz` says the start-up is over (a failed one
    raises); without it, as soon as the port is open.
    """
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + startup_timeout_s
    while True:
        if not thread.is_alive():
            raise RuntimeError("the test server exited during start-up")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError("the test server did not start in time")
        if server.started:
            phase = _start_up_state(url) if wait_for_startup else None
            if phase is None or phase == "ready":
                break
            if phase.startswith("failed"):
                server.should_exit = True
                raise RuntimeError(f"the test server's start-up {phase}")
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@contextmanager
def compile_only_executor(cache_dir: Path) -> Iterator[str]:
    """The real executor service without a GPU runtime (compile-only, whatever the machine), on loopback.

    No spare reference worker (``prewarm_workers`` off): each evaluation starts its own beside its
    compile, and none is left to be killed unused when the test ends (spares: test_executor_prewarm.py)."""
    from executor.app import create_app
    from executor.settings import ExecutorSettings

    settings = ExecutorSettings(cache_dir=cache_dir, runtime="none", prewarm_workers=False)
    with serve_in_thread(create_app(settings)) as url:
        yield url


def post_evaluation_and_hold(url: str, route: str, item: dict[str, Any], timeout_s: float) -> socket.socket:
    """POST one evaluation request ``item`` (JSON-ready) to an executor's ``route`` (``/v1/evaluate``,
    or ``/v1/evaluate/batch`` as a batch of one) on a socket of its own, and return the socket without
    reading the answer: the test closes it to play a caller that goes away."""
    body = json.dumps(item if route == "/v1/evaluate" else {"items": [item]}).encode()
    address = urlsplit(url)
    caller = socket.create_connection((address.hostname, address.port), timeout=timeout_s)
    caller.sendall(
        f"POST {route} HTTP/1.1\r\nHost: {address.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return caller
