"""Run a real ASGI app under uvicorn on a loopback port, in a background thread, for tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from graphdb.embedded import free_port


@contextmanager
def serve_in_thread(app: Any, *, startup_timeout_s: float = 120.0, port: int | None = None) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 at `port` (default: a free one) until the block ends; yields the base URL."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the test server exited during start-up")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError("the test server did not start in time")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@contextmanager
def compile_only_executor(cache_dir: Path) -> Iterator[str]:
    """The real executor service without a GPU runtime (compile-only, whatever the machine), on loopback."""
    from executor.app import create_app
    from executor.settings import ExecutorSettings

    with serve_in_thread(create_app(ExecutorSettings(cache_dir=cache_dir, runtime="none"))) as url:
        yield url
