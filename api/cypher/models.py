"""Wire models of read-only Cypher (`/v1/cypher`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.wire import WireRequest


class CypherRequest(WireRequest):
    """A read-only Cypher query with `$parameters`; writes and administration are refused."""

    query: str = Field(min_length=1, max_length=10_000)
    parameters: dict[str, Any] = Field(default_factory=dict)
    row_limit: int | None = Field(None, ge=1, description="at most the server's limit (the default)")
    timeout_s: float | None = Field(None, gt=0, description="at most the server's limit (the default)")


class CypherResponse(BaseModel):
    """The rows of a read query; `truncated` says that more rows were available past `row_limit`."""

    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    row_limit: int
