"""The MCP server mounted in the API at ``/mcp`` (Streamable HTTP), behind the API's keys and roles.

Every request to ``/mcp`` presents an API key exactly as the API's routes take it (``X-API-Key`` or
``Authorization: Bearer``), checked by `api.auth.get_caller`: no key or an unknown or revoked one is a
401 in the API's error envelope before the MCP layer sees the request (unless anonymous reading is
on, as for the API). The caller rides along in the ASGI scope, where the tools find it to check roles.
The transport is stateless (each POST stands alone and is authenticated on its own), answering in
server-sent events so that long tools can send progress notifications.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.security import HTTPAuthorizationCredentials
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from api.auth import Caller, get_caller
from api.errors import ServiceError, ServiceUnavailableError, envelope, http_error
from api.keys.service import KeyService
from api.mcp.evaluations import EvaluationJobs
from api.mcp.server import build_mcp_server
from api.mcp.service import BACKSTOP_S, ReasoningGraphService
from api.mcp.settings import McpSettings
from api.settings import ApiSettings
from api.state import AppState
from graphdb.store import Neo4jGraphStore

MCP_PATH = "/mcp"
CALLER_KEY = "regraph.caller"
"""Where the gate leaves the authenticated `Caller` in the request's ASGI scope."""


def _credentials(headers: dict[str, str]) -> tuple[str | None, HTTPAuthorizationCredentials | None]:
    api_key = headers.get("x-api-key") or None
    scheme, _, token = headers.get("authorization", "").partition(" ")
    bearer = (
        HTTPAuthorizationCredentials(scheme=scheme, credentials=token.strip())
        if scheme.lower() == "bearer" and token.strip()
        else None
    )
    return api_key, bearer


def _authenticate(state: AppState, headers: dict[str, str], timeout_s: float) -> Caller:
    if state.graph_store is None or state.embedder is None:
        raise ServiceUnavailableError("the graph store is starting or stopping")
    api_key, bearer = _credentials(headers)
    # The key lookup runs under the MCP read limit, server-side, like the tools' reads.
    store = Neo4jGraphStore(state.driver, state.target.database, timeout_s=timeout_s)
    return get_caller(state, KeyService(store), api_key, bearer)


class ApiKeyGate:
    """ASGI middleware in front of the MCP transport: authenticates each request as the API does."""

    def __init__(self, app: ASGIApp, api: FastAPI, limits: McpSettings) -> None:
        """Guard `app` with the keys of the running `api`, looked up within `limits`' read time."""
        self.app = app
        self.api = api
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: AppState | None = getattr(self.api.state, "regraph", None)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            if state is None:
                raise ServiceUnavailableError("the service is starting or stopping")
            timeout_s = self.limits.read_timeout_s
            try:
                with anyio.fail_after(timeout_s + BACKSTOP_S):
                    caller = await anyio.to_thread.run_sync(
                        _authenticate, state, headers, timeout_s, abandon_on_cancel=True
                    )
            except TimeoutError as e:
                raise ServiceUnavailableError(
                    f"the graph database did not answer the key check within {timeout_s + BACKSTOP_S:g} s"
                ) from e
        except ServiceError as e:
            answer = http_error(e)
            response = envelope(answer.status_code, answer.message, answer.error_type, answer.headers)
            if answer.status_code == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="regraph", charset="UTF-8"'
            await response(scope, receive, send)
            return
        scope[CALLER_KEY] = caller
        await self.app(scope, receive, send)


def caller_from_request(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller the gate authenticated for this request."""
    request: Any = ctx.request
    caller = request.scope.get(CALLER_KEY) if request is not None else None
    if not isinstance(caller, Caller):
        raise ToolError("this request was not authenticated")
    return caller


class McpMount:
    """The MCP server in the API: its route, and the session manager the API's lifespan runs."""

    def __init__(self, api: FastAPI, settings: ApiSettings, mcp_settings: McpSettings | None = None) -> None:
        """Build the server over `api`'s state (read at each call: it exists once the lifespan ran)."""
        limits = mcp_settings or McpSettings()

        def service_of() -> ReasoningGraphService:
            state: AppState | None = getattr(api.state, "regraph", None)
            if state is None:
                raise ServiceUnavailableError("the service is starting or stopping")
            return ReasoningGraphService(state, limits)

        self.evaluations = EvaluationJobs()
        self.server: MCPServer = build_mcp_server(service_of, caller_from_request, self.evaluations)
        # Builds the session manager; its own Starlette app is not used, the route below serves it.
        self.server.streamable_http_app(
            streamable_http_path=MCP_PATH, stateless_http=True, host=settings.host
        )
        self.route = Route(
            MCP_PATH, endpoint=ApiKeyGate(StreamableHTTPASGIApp(self.server.session_manager), api, limits)
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve MCP requests for as long as the block runs (inside the API's lifespan); evaluation jobs
        still running at the end are cancelled, their executor requests closed."""
        try:
            async with self.server.session_manager.run():
                yield
        finally:
            await self.evaluations.close()


def mount_mcp(api: FastAPI, settings: ApiSettings) -> McpMount:
    """Add ``/mcp`` to `api`; enter the returned mount's `running()` in the API's lifespan."""
    mount = McpMount(api, settings)
    api.router.routes.append(mount.route)
    return mount
