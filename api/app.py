"""The knowledge service's app factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import APIRouter, FastAPI

from api.audit import http as audit_http
from api.auth import key_role
from api.cypher import http as cypher_http
from api.discovery import announce, withdraw
from api.docs import mount_docs
from api.edge import RequestGate, ResponseHeaders, document_edge_responses
from api.errors import install_error_handlers
from api.examples import http as examples_http
from api.health import http as health_http
from api.keys import http as keys_http
from api.logs import configure_logging
from api.mcp.http import mount_mcp
from api.optimize import http as optimize_http
from api.optimize.service import build_job_service
from api.relabel import http as relabel_http
from api.retrieve import http as retrieve_http
from api.settings import ApiSettings
from api.startup import Startup, StartupCancelledError, StartupGate, end_process_after_failed_startup
from api.state import AppState
from api.techniques import http as techniques_http
from api.transfer import http as transfer_http
from api.ui import mount as mount_ui

logger = logging.getLogger(__name__)

HTTP_ROUTERS: tuple[APIRouter, ...] = (
    health_http.router,
    optimize_http.router,
    retrieve_http.router,
    techniques_http.router,
    examples_http.router,
    relabel_http.decisions_router,
    audit_http.router,
    transfer_http.router,
    keys_http.router,
    relabel_http.router,
    cypher_http.router,
)
"""Each feature's /v1 routes (api/<feature>/http.py), in the order they are matched."""


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """Build the API for these settings. It listens at once; Neo4j is started or reached, and migrated,
    in the background (`api/startup.py`): until then `/readyz` and the routes answer 503."""
    settings = settings or ApiSettings()
    configure_logging(settings.log_level, settings.log_format)
    startup = Startup()

    async def start_up(app: FastAPI) -> AppState:
        """Open everything the routes need; the state is served once this returns."""
        state = await anyio.to_thread.run_sync(AppState.open, settings, startup.enter)
        try:
            startup.enter("starting the job service")
            jobs = build_job_service(settings, state.driver, state.target.database)
            await jobs.start()
        except BaseException:
            await anyio.to_thread.run_sync(state.close)
            raise
        state.jobs = jobs
        return state

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened: list[AppState] = []
        running: list[Path | None] = []
        finished = anyio.Event()

        async def run_start_up() -> None:
            try:
                state = await start_up(app)
                opened.append(state)
                app.state.regraph = state
                # running.json in the data dir: how CLI commands find this stack (api/discovery.py)
                running.append(
                    announce(settings, state.target.uri, embedded=state.server.embedded is not None)
                )
                startup.mark_ready()
                state.serving.set()  # the retrieval preload starts now (api/state.py)
                logger.info("api ready", extra={"neo4j": state.target.uri})
            except StartupCancelledError:
                logger.info("start-up stopped by shut-down")
            except Exception as e:
                startup.mark_failed(str(e))
                logger.error("start-up failed: %s", e, exc_info=e)
                end_process_after_failed_startup()
            finally:
                finished.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run_start_up)
            try:
                async with mcp.running():
                    yield
            finally:
                startup.mark_stopping()
                startup.cancelled.set()  # a start-up still under way stops after its current phase
                await finished.wait()
                for path in running:
                    withdraw(path)
                app.state.regraph = None
                for state in opened:
                    if state.jobs is not None:
                        await state.jobs.stop()
                    await anyio.to_thread.run_sync(state.close)

    app = FastAPI(
        title="ReGraph",
        version="0.1.0",
        summary="A reasoning graph of CUDA optimization techniques, searched by a small local model.",
        lifespan=lifespan,
        docs_url=None,  # /docs is served with its assets from a package (api/docs.py), not a CDN
        redoc_url=None,
    )
    install_error_handlers(app)  # every `ServiceError` by its kind, in the envelope
    mcp = mount_mcp(app, settings)  # /mcp: the MCP server over the same services (api/mcp)

    app.add_middleware(
        RequestGate,
        max_body_bytes=settings.max_request_bytes,
        max_import_bytes=settings.max_import_bytes,
        anonymous_read=settings.anonymous_read,
        check_token=key_role,
    )
    app.add_middleware(StartupGate, startup=startup)  # 503 on the routes until ready
    app.add_middleware(ResponseHeaders)  # outermost: anti-framing headers on every answer
    app.state.startup = startup
    document_edge_responses(app)

    for router in HTTP_ROUTERS:
        app.include_router(router)
    mount_docs(app)
    mount_ui(app, settings)  # the curation workspace under /ui
    return app
