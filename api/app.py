"""The knowledge service's app factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI

from api.auth import key_is_live
from api.discovery import announce, withdraw
from api.docs import mount_docs
from api.edge import RequestGate, document_edge_responses
from api.errors import install_error_handlers, translate_errors
from api.graph.service import GraphServiceError
from api.logs import configure_logging
from api.mcp.http import mount_mcp
from api.optimize.service import OptimizeError, build_job_service
from api.routers import cypher, graph, health, optimize, relabel
from api.settings import ApiSettings
from api.state import AppState
from api.ui import mount as mount_ui

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
        # running.json in the data dir: how CLI commands find this stack (api/discovery.py)
        running = announce(settings, state.target.uri, embedded=state.server.embedded is not None)
        try:
            async with mcp.running():
                yield
        finally:
            withdraw(running)
            app.state.regraph = None
            await jobs.stop()
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
        anonymous_read=settings.anonymous_read,
        check_token=key_is_live,
    )
    document_edge_responses(app)

    app.include_router(health.router)
    app.include_router(optimize.router)
    app.include_router(graph.router)
    app.include_router(relabel.router)
    app.include_router(cypher.router)
    mount_docs(app)
    mount_ui(app, settings)  # the curation workspace under /ui
    return app
