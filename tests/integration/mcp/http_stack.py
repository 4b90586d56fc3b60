"""An API with the MCP server on loopback, as the HTTP tests build it, and the SDK's client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import SecretStr

from api.settings import ApiSettings
from tests.integration.mcp.conftest import SeededGraph


@dataclass(frozen=True)
class Stack:
    """A running API (its base URL) over the seeded graph."""

    url: str
    graph: SeededGraph


def api_settings(seeded: SeededGraph, executor_url: str, data_dir: Path, **more: Any) -> ApiSettings:
    """Settings of an API on the session's Neo4j (seed graph already loaded) and the given executor."""
    return ApiSettings(
        neo4j_uri=seeded.target.uri,
        neo4j_password=SecretStr(seeded.target.password),
        data_dir=data_dir,
        log_format="text",
        seed_graph=None,  # loaded by the `seeded` fixture, the way the API loads it
        preload_retrieval=False,
        executor_url=executor_url,
        **more,
    )


@asynccontextmanager
async def connect(stack: Stack, headers: dict[str, str]) -> AsyncIterator[Client]:
    """The MCP SDK's client on the stack's ``/mcp``, sending `headers` (the API key) with each request."""
    transport = streamable_http_client(
        f"{stack.url}/mcp", http_client=create_mcp_http_client(headers=headers)
    )
    async with Client(transport) as client:
        yield client
