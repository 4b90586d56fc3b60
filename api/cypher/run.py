"""A reader's Cypher query under the app's limits: the one way every face (/v1, /ui, /mcp) runs Cypher.

The query goes through `graphdb.cypher_guard.run_read_only` (via `run_cypher`): a
lexical check, Neo4j's own EXPLAIN verdict, a read transaction with a server-side timeout
(REGRAPH_CYPHER_TIMEOUT_S), and caps on rows (REGRAPH_CYPHER_ROW_LIMIT) and bytes
(REGRAPH_CYPHER_MAX_RESPONSE_BYTES). Its refusals are `ServiceError`s whose kinds each face maps
(400 `cypher_refused`, `cypher_error`, `cypher_timeout`; 429 and 503 from the limiter; docs/security.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from neo4j import Driver

from api.cypher.models import CypherRequest, CypherResponse
from api.graph.errors import (
    GraphUnavailableError,
    QueryAnswerTooLargeError,
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
)
from api.settings import ApiSettings
from api.state import GRAPH_BACKSTOP_S, AppState
from graphdb.cypher_guard import CypherLimits, QueryCancel, run_read_only
from graphdb.errors import (
    CypherAnswerTooLargeError,
    CypherGuardError,
    CypherRefusedError,
    CypherTimeoutError,
    CypherUnavailableError,
)


def run_cypher(
    driver: Driver,
    database: str,
    request: CypherRequest,
    limits: CypherLimits,
    cancel: QueryCancel | None = None,
) -> CypherResponse:
    """Run a reader's query read-only: the API's face of `graphdb.cypher_guard.run_read_only`.

    `limits` are the server's (rows, seconds, response bytes); the request may only lower the first
    two; `cancel` stops it from another thread. Raises `QueryRefusedError` (not a read, or over an input
    limit), `QueryTimedOutError`, `QueryAnswerTooLargeError`, `QueryFailedError` or
    `GraphUnavailableError` (the database did not answer, or the query was cancelled); never a driver
    error.
    """
    row_limit = min(request.row_limit or limits.row_limit, limits.row_limit)
    timeout_s = min(request.timeout_s or limits.timeout_s, limits.timeout_s)
    try:
        result = run_read_only(
            driver,
            request.query,
            request.parameters,
            database=database,
            limits=replace(limits, row_limit=row_limit, timeout_s=timeout_s),
            cancel=cancel,
        )
    except CypherUnavailableError as e:
        raise GraphUnavailableError(str(e)) from e
    except CypherRefusedError as e:
        raise QueryRefusedError(str(e)) from e
    except CypherTimeoutError as e:
        raise QueryTimedOutError(str(e)) from e
    except CypherAnswerTooLargeError as e:
        raise QueryAnswerTooLargeError(str(e)) from e
    except CypherGuardError as e:
        raise QueryFailedError(str(e)) from e
    return CypherResponse(
        columns=result.columns, rows=result.rows, truncated=result.truncated, row_limit=result.row_limit
    )


def cypher_limits(settings: ApiSettings) -> CypherLimits:
    """The server's limits on a reader's query (the /ui console and the MCP tool run under the same)."""
    return CypherLimits(
        row_limit=settings.cypher_row_limit,
        timeout_s=settings.cypher_timeout_s,
        max_response_bytes=settings.cypher_max_response_bytes,
    )


async def run_reader_cypher(
    state: AppState,
    key: str,
    body: CypherRequest,
    *,
    disconnected: Callable[[], Awaitable[bool]] | None = None,
) -> CypherResponse:
    """`key`'s query under the app's limiter.

    It takes one of `key`'s Cypher slots (`api.limits`), runs in a thread of its own that frees the slot
    when it ends, and is stopped, its connection shut, when the caller gives up: cancelled, client gone
    (`disconnected`), or no answer within the query's limit plus `GRAPH_BACKSTOP_S` (a silent or paused
    database, a value Neo4j cannot send). Raises `QueryRefusedError`, `QueryFailedError`,
    `GraphUnavailableError` or a `LimitError` (all `ServiceError`s).
    """
    limits = cypher_limits(state.settings)
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
