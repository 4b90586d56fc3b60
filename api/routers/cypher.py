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
from api.errors import BadRequestError, responses
from api.graph.protocol import CypherRequest, CypherResponse
from api.graph.service import (
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
    run_cypher,
)
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
    settings = state.settings
    limits = CypherLimits(
        row_limit=settings.cypher_row_limit,
        timeout_s=settings.cypher_timeout_s,
        max_response_bytes=settings.cypher_max_response_bytes,
    )
    try:
        return run_cypher(driver, state.target.database, body, limits)
    except QueryRefusedError as e:
        raise CypherRefusedApiError(str(e)) from e
    except QueryTimedOutError as e:
        raise CypherTimeoutApiError(str(e)) from e
    except QueryFailedError as e:
        raise CypherFailedApiError(str(e)) from e
