"""The graph's services composed: `GraphService`, one object with every graph operation of the API.

Each operation lives in the service of its aggregate, in its feature folder, and asks the store only for
that aggregate's protocol (`graphdb.store.interface`): `api.techniques.service.TechniqueService`
(`TechniqueStore`), `api.examples.service.ExampleService` (`ExampleStore`),
`api.retrieve.service.RetrievalService` (`RetrievalStore`), `api.audit.service.AuditService`
(`AuditStore`), `api.keys.service.KeyService` (`KeyStore`) and `api.transfer.service.TransferService`
(`TransferStore`). `GraphService` inherits them all over one whole `GraphStore`, for the faces that
use several (/v1, /ui, MCP). `run_cypher` is here too: it takes the driver, not the store.

No FastAPI here. Every operation calls the store (which records who and when for each write in the
same transaction) and raises `GraphServiceError` subclasses (`api.graph.errors`, re-exported here),
which the faces translate. Store and embedding failures are translated at the boundary of the library.
"""

from __future__ import annotations

from dataclasses import replace

from neo4j import Driver

from api.audit.service import AuditService
from api.cypher.models import CypherRequest, CypherResponse
from api.examples.service import ExampleService
from api.graph.errors import (
    GraphConflictError,
    GraphServiceError,
    GraphUnavailableError,
    InvalidApiKeyError,
    InvalidExportError,
    InvalidGraphRequestError,
    QueryAnswerTooLargeError,
    QueryFailedError,
    QueryRefusedError,
    QueryTimedOutError,
    UnknownResourceError,
)
from api.keys.service import KeyService
from api.retrieve.service import RetrievalService
from api.techniques.service import TechniqueService
from api.transfer.service import TransferService, check_export, parse_export
from graphdb.cypher_guard import CypherLimits, QueryCancel, run_read_only
from graphdb.errors import (
    CypherAnswerTooLargeError,
    CypherGuardError,
    CypherRefusedError,
    CypherTimeoutError,
    CypherUnavailableError,
)
from graphdb.store import GraphStore
from search.embeddings import Embedder

__all__ = [
    "GraphConflictError",
    "GraphService",
    "GraphServiceError",
    "GraphUnavailableError",
    "InvalidApiKeyError",
    "InvalidExportError",
    "InvalidGraphRequestError",
    "QueryAnswerTooLargeError",
    "QueryFailedError",
    "QueryRefusedError",
    "QueryTimedOutError",
    "UnknownResourceError",
    "check_export",
    "parse_export",
    "run_cypher",
]


class GraphService(
    TechniqueService, ExampleService, RetrievalService, AuditService, KeyService, TransferService
):
    """Every graph operation of the API, over the whole store and the embedding model."""

    store: GraphStore

    def __init__(self, store: GraphStore, embedder: Embedder) -> None:
        """Serve `store`, embedding code and technique texts with `embedder`."""
        self.store = store
        self.embedder = embedder


def run_cypher(
    driver: Driver,
    database: str,
    request: CypherRequest,
    limits: CypherLimits,
    cancel: QueryCancel | None = None,
) -> CypherResponse:
    """Run a reader's query read-only: the HTTP and MCP faces of `graphdb.cypher_guard.run_read_only`.

    `limits` are the server's (rows, seconds, response bytes); the request may only lower the first
    two; `cancel` stops it from another thread. Raises `QueryRefusedError` (not a read, or over an input
    limit), `QueryTimedOutError`, `QueryFailedError` or `GraphUnavailableError` (the database did not
    answer, or the query was cancelled); never a driver error.
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
