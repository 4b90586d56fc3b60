"""The knowledge service's app factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI, Request, Response

from api.errors import envelope, install_error_handlers, translate_errors
from api.graph.service import GraphServiceError
from api.logs import configure_logging
from api.mcp.http import mount_mcp
from api.optimize.service import OptimizeError, build_job_service
from api.routers import cypher, graph, health, optimize, relabel
from api.settings import ApiSettings
from api.state import AppState

logger = logging.getLogger(__name__)


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """Build the API for these settings. Neo4j is started or reached, and migrated, at start-up."""
    settings = settings or ApiSettings()
    configure_logging(settings.log_level, settings.log_format)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await anyio.to_thread.run_sync(AppState.open, settings)
        jobs = build_job_service(settings, state.driver, state.target.database)
        try:
            await jobs.start()
        except BaseException:
            await anyio.to_thread.run_sync(state.close)
            raise
        state.jobs = jobs
        app.state.regraph = state
        logger.info("api ready", extra={"neo4j": state.target.uri})
        try:
            async with mcp.running():
                yield
        finally:
            app.state.regraph = None
            await jobs.stop()
            await anyio.to_thread.run_sync(state.close)

    app = FastAPI(
        title="ReGraph",
        version="0.1.0",
        summary="A reasoning graph of CUDA optimization techniques, searched by a small local model.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    mcp = mount_mcp(app, settings)  # /mcp: the MCP server over the same services (api/mcp)
    translate_errors(app, GraphServiceError, graph.api_error)
    translate_errors(app, OptimizeError, optimize.api_error)

    @app.middleware("http")
    async def limit_body_size(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > settings.max_request_bytes:
            return envelope(413, f"request body over {settings.max_request_bytes} bytes", "payload_too_large")
        return await call_next(request)

    app.include_router(health.router)
    app.include_router(optimize.router)
    app.include_router(graph.router)
    app.include_router(relabel.router)
    app.include_router(cypher.router)
    return app
