"""The MCP server over stdio, in the calling process: the entry point of ``regraph mcp``.

It opens the same state the API's lifespan opens (Neo4j started or reached and migrated, the graph
store, the embedding model, the job service) and serves the same tools, resources and prompts as
``/mcp``. Standard output carries the protocol only (logging goes to standard error).

The caller's role comes from an API key, checked against the graph at start-up; without one the
agent reads as a reader named "local" (reviewing examples needs a curator key).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from api.auth import Caller
from api.errors import ServiceError, ServiceErrorKind, ServiceUnavailableError
from api.graph.errors import GraphServiceError
from api.keys.service import KeyService
from api.mcp.evaluations import EvaluationJobs
from api.mcp.server import build_mcp_server
from api.mcp.service import ReasoningGraphService
from api.mcp.settings import McpSettings
from api.optimize.errors import OptimizeError
from api.optimize.service import JobService, build_job_service
from api.settings import ApiSettings
from api.state import AppState
from graphdb.errors import GraphDBError
from graphdb.models import Role

logger = logging.getLogger(__name__)

LOCAL_CALLER = Caller(name="local", role=Role.READER)
UNVERIFIED_KEY_CALLER = Caller(name="(key being checked)", role=Role.CURATOR)
"""Who lists the tools over stdio while the given key is still being checked: the highest role a tool
needs, for the listing only (every call waits for the check and is gated by the key's real role)."""
"""The caller over stdio without an API key: the local user, reading."""


class StdioStartupError(ServiceError):
    """The stack could not be opened, or the API key given is not valid."""

    kind = ServiceErrorKind.UNAVAILABLE


def _caller(state: AppState, api_key: str | None) -> Caller:
    if not api_key:
        return LOCAL_CALLER
    assert state.graph_store is not None and state.embedder is not None  # AppState.open made them
    try:
        key = KeyService(state.graph_store).key_for_token(api_key)
    except GraphServiceError as e:
        raise StdioStartupError(f"the API key is not valid: {e}") from e
    return Caller(name=key.name, role=key.role, key_id=key.id)


class _Opening:
    """The stack's state, opened in the background while the server already answers the handshake."""

    def __init__(self, key_given: bool) -> None:
        self.key_given = key_given
        self.phase = "opening the graph database (Neo4j), the embedding model and the job service"
        self.done = anyio.Event()
        self.state: AppState | None = None  # once ready
        self.opened: AppState | None = None  # as soon as opened (closed when the server stops)
        self.caller: Caller = LOCAL_CALLER
        self.error: StdioStartupError | None = None

    async def ready(self) -> None:
        with anyio.move_on_after(READY_WAIT_S):
            await self.done.wait()
        if self.error is not None:
            raise ServiceUnavailableError(f"the stack could not start: {self.error}")
        if self.state is None:
            raise ServiceUnavailableError(f"starting: {self.phase}; try again in a few seconds")

    def caller_of(self, _ctx: object) -> Caller:
        # Before the key is checked only `tools/list` asks (calls, reads and prompts wait for `ready`,
        # and the role gate checks a call's role after that): a key given at start-up lists every tool
        # meanwhile, so that an agent listing at once sees what its key may call.
        if self.state is None and self.key_given:
            return UNVERIFIED_KEY_CALLER
        return self.caller


STOP_GRACE_S = 0.5
"""How long the server goes on after its stack failed to open, so that waiting calls get the reason."""


async def _open_in_daemon_thread(settings: ApiSettings, opening: _Opening) -> AppState:
    """`AppState.open` in a daemon thread: a client that goes away during the opening is not kept
    waiting for it (an embedded Neo4j being started stops with us: it exits when its stdin closes)."""
    outcome: dict[str, Any] = {}
    finished = anyio.Event()
    loop = anyio.lowlevel.current_token()

    def run() -> None:
        try:
            # Kept as soon as it exists, so that it is closed even if the server stops meanwhile.
            opening.opened = outcome["state"] = AppState.open(settings)
        except BaseException as e:  # handed to the waiting task below
            outcome["error"] = e
        with contextlib.suppress(RuntimeError):  # the event loop is gone: nobody waits any more
            anyio.from_thread.run_sync(finished.set, token=loop)

    threading.Thread(target=run, name="regraph-mcp-open", daemon=True).start()
    await finished.wait()
    if "error" in outcome:
        raise outcome["error"]
    state: AppState = outcome["state"]
    return state


READY_WAIT_S = 120.0
"""How long a call made during start-up waits for the stack before it is answered 'starting'."""


async def serve_stdio(
    settings: ApiSettings,
    mcp_settings: McpSettings,
    api_key: str | None,
    *,
    recover_jobs: bool = True,
    on_startup_error: Callable[[StdioStartupError], None] | None = None,
) -> None:
    """Serve MCP on stdin/stdout until the client closes it, opening the stack's state meanwhile.

    The server answers the client's handshake and lists its tools at once (coding agents wait only
    seconds for a server to start); tool calls and resource reads wait for the state (Neo4j started or
    reached and migrated, the embedding model, the job service) and are answered with the reason if it
    cannot be opened (the reason is logged on standard error too). `recover_jobs` marks jobs left
    unfinished in the graph as failed at start-up, as the API does; off when the graph belongs to a
    running API, whose jobs are not this process's to judge. `on_startup_error`, when given, is called
    with the reason once the stack failed to open (the state closed), and is expected to end the process.
    """
    opening = _Opening(key_given=bool(api_key))
    evaluations = EvaluationJobs()
    jobs: JobService | None = None

    async def open_state() -> None:
        nonlocal jobs

        try:
            state = await _open_in_daemon_thread(settings, opening)
        except GraphDBError as e:
            opening.error = StdioStartupError(str(e))
            logger.error("mcp: the stack could not start: %s", e)
            opening.done.set()
            return
        opening.phase = "checking the API key and recovering jobs"
        try:
            jobs = build_job_service(settings, state.driver, state.target.database)
            if recover_jobs:
                await jobs.start()
            state.jobs = jobs
            opening.caller = await anyio.to_thread.run_sync(_caller, state, api_key)
        except (OptimizeError, StdioStartupError) as e:
            opening.error = e if isinstance(e, StdioStartupError) else StdioStartupError(str(e))
            logger.error("mcp: the stack could not start: %s", e)
            opening.done.set()
            return
        opening.state = state
        state.serving.set()  # the retrieval preload starts now (api/state.py)
        logger.info("mcp ready", extra={"neo4j": state.target.uri, "caller": opening.caller.name})
        opening.done.set()

    def service() -> ReasoningGraphService:
        if opening.state is None:
            raise ServiceUnavailableError(f"starting: {opening.phase}")
        return ReasoningGraphService(opening.state, mcp_settings)

    server = build_mcp_server(service, opening.caller_of, evaluations, opening.ready)
    logger.info("mcp serving on stdio (the stack opens in the background)")

    async def open_or_stop(group: anyio.abc.TaskGroup) -> None:
        await open_state()
        if opening.error is not None:  # nothing can be served: stop, and say why (StdioStartupError)
            await anyio.sleep(STOP_GRACE_S)  # calls waiting for the state get the reason first
            if on_startup_error is not None:
                # The protocol's reader blocks on stdin, which the client may keep open: the caller
                # ends the process (cancelling the reader would wait for the client's next message).
                await evaluations.close()
                if opening.opened is not None:
                    await anyio.to_thread.run_sync(opening.opened.close)
                on_startup_error(opening.error)
            group.cancel_scope.cancel()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(open_or_stop, group)
            await server.run_stdio_async()
            group.cancel_scope.cancel()
        if opening.error is not None:
            raise opening.error
    finally:
        await evaluations.close()
        if jobs is not None:
            await jobs.stop()
        if opening.opened is not None:
            await anyio.to_thread.run_sync(opening.opened.close)
