"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.deps import StateDep
from api.errors import ERROR_RESPONSES, ServiceUnavailableError
from graphdb.connection import readiness
from graphdb.errors import GraphDBError

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is alive")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz", summary="Neo4j answers and the schema is at the latest migration", responses=ERROR_RESPONSES
)
def readyz(state: StateDep) -> dict[str, Any]:
    try:
        report = readiness(state.driver, state.target.database)
    except GraphDBError as e:
        raise ServiceUnavailableError(str(e)) from e
    if not report["schema_up_to_date"]:
        raise ServiceUnavailableError(
            f"schema at migration {report['schema_version']}, latest is {report['latest_schema_version']}; "
            "run `regraph db migrate`"
        )
    return {"status": "ready", **report, "neo4j_uri": state.target.uri}
