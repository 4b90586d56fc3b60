"""``POST /v1/cypher``: read-only Cypher for readers (see docs/cypher-examples.md for useful queries).

The query goes through `graphdb.cypher_guard.run_read_only` (via `api.graph.service.run_cypher`, which
the MCP server calls too): a lexical check, Neo4j's own EXPLAIN verdict, a read transaction with a
server-side timeout (REGRAPH_CYPHER_TIMEOUT_S), and caps on rows (REGRAPH_CYPHER_ROW_LIMIT) and bytes
(REGRAPH_CYPHER_MAX_RESPONSE_BYTES). Refusals are 400 `cypher_refused` (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request

from api.auth import ANONYMOUS, RequireReader
from api.deps import StateDep
from api.errors import ApiError, BadRequestError, ServiceUnavailableError, responses
from api.graph.protocol import CypherRequest, CypherResponse
from api.graph.service import (
    GraphUnavailableError,
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
    run_cypher,
)
from api.limits import KeyBusyError, LimitError
from api.settings import ApiSettings
from api.state import GRAPH_BACKSTOP_S, AppState
from graphdb.cypher_guard import CypherLimits, QueryCancel

router = APIRouter(prefix="/v1", tags=["cypher"])


class TooManyQueriesError(ApiError):
    """This key already has as many queries running as it may."""

    status_code = 429
    error_type = "rate_limited"


async def run_reader_cypher(
    state: AppState,
    key: str,
    body: CypherRequest,
    *,
    disconnected: Callable[[], Awaitable[bool]] | None = None,
) -> CypherResponse:
    """A reader's query under the app's limiter: the one way every face (/v1, /ui, /mcp) runs Cypher.

    It takes one of `key`'s Cypher slots (`api.limits`), runs in a thread of its own that frees the slot
    when it ends, and is stopped, its connection shut, when the caller gives up: cancelled, client gone
    (`disconnected`), or no answer within the query's limit plus `GRAPH_BACKSTOP_S` (a silent or paused
    database, a value Neo4j cannot send). Raises `QueryRefusedError`, `QueryFailedError`,
    `GraphUnavailableError` or a `LimitError`.
    """
    settings = state.settings
    limits = cypher_limits(settings)
    timeout_s = min(body.timeout_s or limits.timeout_s, limits.timeout_s)
    cancel = QueryCancel()
    return await state.limiter.run_in_thread(
        "cypher",
        key,
        lambda: run_cypher(state.driver, state.target.database, body, limits, cancel),
        limit_s=timeout_s + GRAPH_BACKSTOP_S,
        abandon=cancel.cancel,
        disconnected=disconnected,
    )


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
    responses=responses(400, 413, 429),
)
async def cypher(
    body: CypherRequest, caller: RequireReader, state: StateDep, request: Request
) -> CypherResponse:
    try:
        return await run_reader_cypher(
            state, caller.key_id or ANONYMOUS, body, disconnected=request.is_disconnected
        )
    except (QueryRefusedError, QueryFailedError, GraphUnavailableError, LimitError) as e:
        raise cypher_api_error(e) from e


def cypher_limits(settings: ApiSettings) -> CypherLimits:
    """The server's limits on a reader's query (the /ui console runs under the same ones)."""
    return CypherLimits(
        row_limit=settings.cypher_row_limit,
        timeout_s=settings.cypher_timeout_s,
        max_response_bytes=settings.cypher_max_response_bytes,
    )


def cypher_api_error(
    error: QueryRefusedError | QueryFailedError | GraphUnavailableError | LimitError,
) -> ApiError:
    """The HTTP error of a refused, failed or limited query (the /ui console shows the same type and message)."""
    if isinstance(error, QueryRefusedError):
        return CypherRefusedApiError(str(error))
    if isinstance(error, QueryTimedOutError):
        return CypherTimeoutApiError(str(error))
    if isinstance(error, KeyBusyError):
        return TooManyQueriesError(str(error), headers={"Retry-After": str(error.retry_after_s)})
    if isinstance(error, LimitError):  # no slot in all, the database silent past the limit, client gone
        return ServiceUnavailableError(str(error), headers={"Retry-After": str(error.retry_after_s)})
    if isinstance(error, GraphUnavailableError):
        return ServiceUnavailableError(str(error), headers={"Retry-After": "5"})
    return CypherFailedApiError(str(error))
