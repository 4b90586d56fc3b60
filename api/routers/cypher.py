"""``POST /v1/cypher``: read-only Cypher for readers (see docs/cypher-examples.md for useful queries).

The query goes through `graphdb.cypher_guard.run_read_only` (via `api.graph.service.run_cypher`, which
the MCP server calls too): a lexical check, Neo4j's own EXPLAIN verdict, a read transaction with a
server-side timeout (REGRAPH_CYPHER_TIMEOUT_S), and caps on rows (REGRAPH_CYPHER_ROW_LIMIT) and bytes
(REGRAPH_CYPHER_MAX_RESPONSE_BYTES). Refusals are 400 `cypher_refused` (docs/security.md).
"""

from __future__ import annotations

from fastapi import APIRouter

from api.auth import RequireReader
from api.deps import DriverDep, StateDep
from api.errors import ApiError, BadRequestError, responses
from api.graph.protocol import CypherRequest, CypherResponse
from api.graph.service import (
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
    run_cypher,
)
from api.settings import ApiSettings
from graphdb.cypher_guard import CypherLimits

router = APIRouter(prefix="/v1", tags=["cypher"])


class CypherRefusedApiError(BadRequestError):
    """The query writes or administers; only reads are allowed."""

    error_type = "cypher_refused"


class CypherFailedApiError(BadRequestError):
    """The query is allowed but the database could not run it (syntax, types...)."""

    error_type = "cypher_error"


class CypherTimeoutApiError(BadRequestError):
    """The query ran past its time limit and was stopped."""

    error_type = "cypher_timeout"


@router.post(
    "/cypher",
    summary="Run a read-only Cypher query with $parameters, a timeout and a row limit",
    responses=responses(400, 413),
)
def cypher(body: CypherRequest, caller: RequireReader, state: StateDep, driver: DriverDep) -> CypherResponse:
    try:
        return run_cypher(driver, state.target.database, body, cypher_limits(state.settings))
    except (QueryRefusedError, QueryFailedError) as e:
        raise cypher_api_error(e) from e


def cypher_limits(settings: ApiSettings) -> CypherLimits:
    """The server's limits on a reader's query (the /ui console runs under the same ones)."""
    return CypherLimits(
        row_limit=settings.cypher_row_limit,
        timeout_s=settings.cypher_timeout_s,
        max_response_bytes=settings.cypher_max_response_bytes,
    )


def cypher_api_error(error: QueryRefusedError | QueryFailedError) -> ApiError:
    """The HTTP error of a refused or failed query (the /ui console shows the same type and message)."""
    if isinstance(error, QueryRefusedError):
        return CypherRefusedApiError(str(error))
    if isinstance(error, QueryTimedOutError):
        return CypherTimeoutApiError(str(error))
    return CypherFailedApiError(str(error))
