"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
from fastapi import APIRouter

from api.deps import StartupDep, StateDep
from api.errors import ERROR_RESPONSES, ServiceUnavailableError
from graphdb.connection import readiness
from graphdb.errors import GraphDBError

router = APIRouter(tags=["health"])

# Health checks run on the event loop (liveness) or on threads of their own (readiness), never in the
# thread pool that routes like /v1/cypher fill, so they answer while user queries are slow.
_READINESS_THREADS = anyio.CapacityLimiter(2)
# A Neo4j that accepts connections but does not answer (a stopped process, a lost network) would
# hold a check until the driver's socket gives up (minutes): readiness answers 503 after this instead.
READINESS_TIMEOUT_S = 5.0
# The executor's liveness answers from its event loop at once; a slower one is taken as down.
EXECUTOR_TIMEOUT_S = 2.0


async def executor_state(url: str | None) -> str:
    """``up``, ``not configured``, or why the executor at ``url`` does not count as up."""
    if url is None:
        return "not configured"
    try:
        async with httpx.AsyncClient(timeout=EXECUTOR_TIMEOUT_S) as client:
            response = await client.get(f"{url.rstrip('/')}/healthz")
    except httpx.HTTPError as e:
        return f"down ({type(e).__name__}: {e})"
    if response.status_code != 200:
        return f"down (its /healthz answered {response.status_code})"
    return "up"


@router.get("/healthz", summary="The process is alive (from its first moment; `startup` says how far it is)")
async def healthz(startup: StartupDep) -> dict[str, str]:
    return {"status": "ok", "startup": startup.describe()}


@router.get(
    "/readyz",
    summary="Neo4j answers, the schema is at the latest migration and the executor (when one is configured) "
    "is alive (503 naming what is not: 'starting: <phase>' during start-up, the executor when it is down)",
    responses=ERROR_RESPONSES,
)
async def readyz(state: StateDep) -> dict[str, Any]:
    report = None
    try:
        with anyio.move_on_after(READINESS_TIMEOUT_S):
            # A check cut off here goes on in its thread until the driver gives up; its slot is freed.
            report = await anyio.to_thread.run_sync(
                readiness,
                state.driver,
                state.target.database,
                limiter=_READINESS_THREADS,
                abandon_on_cancel=True,
            )
    except GraphDBError as e:
        raise ServiceUnavailableError(str(e)) from e
    if report is None:
        raise ServiceUnavailableError(f"Neo4j did not answer within {READINESS_TIMEOUT_S:.0f} s")
    if not report["schema_up_to_date"]:
        raise ServiceUnavailableError(
            f"schema at migration {report['schema_version']}, latest is {report['latest_schema_version']}; "
            "run `regraph db migrate`"
        )
    url = state.settings.executor_url
    executor = await executor_state(url)
    if executor not in ("up", "not configured"):
        # Evaluations would all fail: not ready (a supervisor, `regraph up`, restarts a local one).
        raise ServiceUnavailableError(f"the executor at {url} is {executor}")
    return {"status": "ready", **report, "neo4j_uri": state.target.uri, "executor": executor}
