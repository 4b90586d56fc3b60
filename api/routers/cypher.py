"""``POST /v1/cypher``: read-only Cypher for readers (see docs/cypher-examples.md for useful queries).

The query is checked by `graphdb.cypher_guard` (writes, administration, LOAD CSV, self-committing
batches and unlisted procedures are refused with 400), then runs in a read transaction with
`$parameters`, a server-side timeout (REGRAPH_CYPHER_TIMEOUT_S) and a row cap (REGRAPH_CYPHER_ROW_LIMIT).
"""

from __future__ import annotations

from fastapi import APIRouter

from api.auth import RequireReader
from api.deps import DriverDep, StateDep
from api.errors import ApiError, BadRequestError, responses
from api.graph.protocol import CypherRequest, CypherResponse
from api.graph.service import (
    CypherLimits,
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
    run_cypher,
)

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
    limits = CypherLimits(
        row_limit=state.settings.cypher_row_limit, timeout_s=state.settings.cypher_timeout_s
    )
    try:
        return run_cypher(driver, state.target.database, body, limits)
    except (QueryRefusedError, QueryFailedError) as e:
        raise cypher_api_error(e) from e


def cypher_api_error(error: QueryRefusedError | QueryFailedError) -> ApiError:
    """The HTTP error of a refused or failed query (the /ui console shows the same type and message)."""
    if isinstance(error, QueryRefusedError):
        return CypherRefusedApiError(str(error))
    if isinstance(error, QueryTimedOutError):
        return CypherTimeoutApiError(str(error))
    return CypherFailedApiError(str(error))
