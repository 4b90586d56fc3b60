"""``POST /v1/cypher``: read-only Cypher for readers (see docs/cypher-examples.md for useful queries).

The query goes through `graphdb.cypher_guard.run_read_only` (via `api.graph.service.run_cypher`, which
the MCP server calls too): a lexical check, Neo4j's own EXPLAIN verdict, a read transaction with a
server-side timeout (REGRAPH_CYPHER_TIMEOUT_S), and caps on rows (REGRAPH_CYPHER_ROW_LIMIT) and bytes
(REGRAPH_CYPHER_MAX_RESPONSE_BYTES). Refusals are 400 `cypher_refused` (docs/security.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import APIRouter, Request

from api.auth import ANONYMOUS, RequireReader
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


class TooManyQueriesError(ApiError):
    """This key already has as many queries running as it may."""

    status_code = 429
    error_type = "rate_limited"


class CypherSlots:
    """How many reader queries run at once: in all (their own threads, so that health checks and
    other routes never wait behind them) and per key (429 past it)."""

    def __init__(self, total: int, per_key: int) -> None:
        """At most `total` queries run at once (others wait), at most `per_key` of one key (others get 429)."""
        self.limiter = anyio.CapacityLimiter(total)
        self.per_key = per_key
        self.running: Counter[str] = Counter()

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[anyio.CapacityLimiter]:
        """Hold one of `key`'s slots for the block; yields the thread limiter to run the query under."""
        if self.running[key] >= self.per_key:
            raise TooManyQueriesError(
                f"this key already runs {self.per_key} Cypher queries; wait for one to finish",
                headers={"Retry-After": "1"},
            )
        self.running[key] += 1
        try:
            yield self.limiter
        finally:
            self.running[key] -= 1
            if self.running[key] <= 0:
                del self.running[key]


def cypher_slots(request: Request, total: int, per_key: int) -> CypherSlots:
    """The app's query slots (made on first use)."""
    slots: CypherSlots | None = getattr(request.app.state, "cypher_slots", None)
    if slots is None:
        slots = CypherSlots(total, per_key)
        request.app.state.cypher_slots = slots
    return slots


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
    body: CypherRequest, caller: RequireReader, state: StateDep, driver: DriverDep, request: Request
) -> CypherResponse:
    settings = state.settings
    slots = cypher_slots(request, settings.cypher_max_concurrent, settings.cypher_max_concurrent_per_key)
    try:
        async with slots.slot(caller.key_id or ANONYMOUS) as limiter:
            return await anyio.to_thread.run_sync(
                run_cypher, driver, state.target.database, body, cypher_limits(settings), limiter=limiter
            )
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
