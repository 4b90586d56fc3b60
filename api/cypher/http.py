"""``POST /v1/cypher``: read-only Cypher for readers (see docs/cypher-examples.md for useful queries).

Thin: the query runs through `api.cypher.run.run_reader_cypher`, the path every face shares; its
refusals are answered by the app-wide error handler (400 `cypher_refused`, `cypher_error`,
`cypher_timeout`; 429 past the key's share; 503 when the database or the limiter cannot serve it).
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from api.auth import ANONYMOUS, RequireReader
from api.cypher.models import CypherRequest, CypherResponse
from api.cypher.run import run_reader_cypher
from api.deps import StateDep
from api.errors import responses

router = APIRouter(prefix="/v1", tags=["cypher"])


@router.post(
    "/cypher",
    summary="Run a read-only Cypher query with $parameters, a timeout and a row limit",
    responses=responses(400, 413, 429),
)
async def cypher(
    body: CypherRequest, caller: RequireReader, state: StateDep, request: Request
) -> CypherResponse:
    return await run_reader_cypher(
        state, caller.key_id or ANONYMOUS, body, disconnected=request.is_disconnected
    )
