"""Start-up in the background: the API listens at once and says what it is waiting for.

Reaching (or starting) Neo4j, migrating and loading the models takes from a second to half a minute.
The app's lifespan starts that work in a worker thread and returns at once, so uvicorn opens its port
immediately: `/healthz` answers 200 from the first moment (with the start-up phase in its body),
`/readyz` answers 503 "starting: <phase>" until the app is ready, and every other route answers 503
with `Retry-After` (`StartupGate`) instead of a refused connection.

A start-up that fails (Neo4j cannot be started or reached in time, credentials refused, a migration
fails) is logged and ends the process with exit status 3, as a lifespan that fails before uvicorn
listens does: the operator's supervisor (systemd, compose, Kubernetes) sees the exit and the log says
why, instead of a process that stays up and can never become ready.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from enum import StrEnum

from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import envelope

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 5
"""What `Retry-After` says while the app starts."""
STARTUP_FAILURE_EXIT_STATUS = 3
"""The process's exit status after a failed start-up (uvicorn's own for a lifespan that fails)."""
# Served while the app starts: liveness, readiness (503 with the phase) and the static API description.
_SERVED_WHILE_STARTING = ("/healthz", "/readyz", "/openapi.json", "/docs")


class StartupCancelledError(Exception):
    """Shut-down was asked for while the app was starting; what was opened has been closed."""


class StartupStage(StrEnum):
    """How far the start-up is."""

    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPING = "stopping"


class Startup:
    """Where the app's start-up is (thread-safe): the phase, the failure, and whether to give up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage = StartupStage.STARTING
        self._detail = "waiting for the event loop"
        self._began = time.monotonic()
        self.cancelled = threading.Event()  # set at shut-down: the start-up stops between phases

    @property
    def stage(self) -> StartupStage:
        return self._stage

    @property
    def ready(self) -> bool:
        return self._stage is StartupStage.READY

    def describe(self) -> str:
        """One line for people: "starting: migrating the schema", "ready", "failed: <why>"."""
        with self._lock:
            return (
                self._stage.value
                if self._stage is StartupStage.READY
                else f"{self._stage.value}: {self._detail}"
            )

    def enter(self, phase: str) -> None:
        """Record the phase the start-up is in (raises `StartupCancelledError` once shut-down was asked)."""
        if self.cancelled.is_set():
            raise StartupCancelledError("shut-down asked for during start-up")
        with self._lock:
            self._detail = phase
        logger.info("start-up: %s", phase, extra={"seconds": round(time.monotonic() - self._began, 2)})

    def mark_ready(self) -> None:
        with self._lock:
            self._stage, self._detail = StartupStage.READY, ""

    def mark_failed(self, reason: str) -> None:
        with self._lock:
            self._stage, self._detail = StartupStage.FAILED, reason

    def mark_stopping(self) -> None:
        with self._lock:
            self._stage, self._detail = StartupStage.STOPPING, "shutting down"


def end_process_after_failed_startup() -> None:
    """Stop the event loop's run with `SystemExit(3)`: uvicorn's `run()` (and `regraph up`) exit with it.

    Raised from a loop callback, `SystemExit` leaves the loop at once; `asyncio.run` then cancels the
    remaining tasks (the lifespan among them, whose clean-up has nothing left to close) and re-raises it.
    """

    def leave() -> None:
        raise SystemExit(STARTUP_FAILURE_EXIT_STATUS)

    asyncio.get_running_loop().call_soon(leave)


class StartupGate:
    """While the app starts (or after its start-up failed), answer 503 with `Retry-After` on every
    route but liveness, readiness and the API description, before anything else sees the request."""

    def __init__(self, app: ASGIApp, *, startup: Startup) -> None:
        self.app = app
        self.startup = startup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.startup.ready or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if any(path == p or path.startswith(p + "/") for p in _SERVED_WHILE_STARTING):
            await self.app(scope, receive, send)
            return
        response = envelope(
            503, unavailable_message(self.startup), headers={"Retry-After": str(RETRY_AFTER_S)}
        )
        await response(scope, receive, send)


def unavailable_message(startup: Startup) -> str:
    """Why a request cannot be served yet (or any more), for 503 answers."""
    stage = startup.stage
    if stage is StartupStage.STARTING:
        return f"{startup.describe()}; the service is starting, retry in {RETRY_AFTER_S} s"
    if stage is StartupStage.FAILED:
        return f"start-up {startup.describe()}; the process is exiting (see its log)"
    return "the service is stopping"
