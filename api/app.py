"""The knowledge service's app factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from fastapi import FastAPI

from api.auth import key_role
from api.discovery import announce, withdraw
from api.docs import mount_docs
from api.edge import RequestGate, ResponseHeaders, document_edge_responses
from api.errors import install_error_handlers, translate_errors
from api.graph.service import GraphServiceError
from api.logs import configure_logging
from api.mcp.http import mount_mcp
from api.optimize.service import OptimizeError, build_job_service
from api.routers import cypher, graph, health, optimize, relabel
from api.settings import ApiSettings
from api.startup import Startup, StartupCancelledError, StartupGate, end_process_after_failed_startup
from api.state import AppState
from api.ui import mount as mount_ui

logger = logging.getLogger(__name__)


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
    install_error_handlers(app)
    mcp = mount_mcp(app, settings)  # /mcp: the MCP server over the same services (api/mcp)
    translate_errors(app, GraphServiceError, graph.api_error)
    translate_errors(app, OptimizeError, optimize.api_error)

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

    app.include_router(health.router)
    app.include_router(optimize.router)
    app.include_router(graph.router)
    app.include_router(relabel.router)
    app.include_router(cypher.router)
    mount_docs(app)
    mount_ui(app, settings)  # the curation workspace under /ui
    return app
