"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

import anyio
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


@router.get("/healthz", summary="The process is alive (from its first moment; `startup` says how far it is)")
async def healthz(startup: StartupDep) -> dict[str, str]:
    return {"status": "ok", "startup": startup.describe()}


@router.get(
    "/readyz",
    summary="Neo4j answers and the schema is at the latest migration (503 'starting: <phase>' during start-up)",
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
    return {"status": "ready", **report, "neo4j_uri": state.target.uri}
