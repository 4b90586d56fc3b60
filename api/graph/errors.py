"""The errors of the graph's services (`api/<feature>/service.py`, composed by `api.graph.service`),
and the one place that translates the store's, the search's and the embedder's errors into them.

Each face maps these to its answers (HTTP statuses, MCP tool errors, /ui messages).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from api.errors import ServiceError, ServiceErrorKind
from graphdb.errors import (
    ApiKeyNotFoundError,
    AuditEntryNotFoundError,
    DecisionNotFoundError,
    ExampleNotFoundError,
    GraphDBError,
    ImportConflictError,
    InvalidOperationError,
    StoreUnavailableError,
    TechniqueExistsError,
    TechniqueNotFoundError,
    TransitionNotFoundError,
)
from search.embeddings import EmbeddingError
from search.errors import KnowledgeError


class GraphServiceError(ServiceError):
    """Root of the graph service's errors."""


class UnknownResourceError(GraphServiceError):
    """The technique, transition, example, decision or key named does not exist."""

    kind = ServiceErrorKind.NOT_FOUND


class InvalidGraphRequestError(GraphServiceError):
    """The request is well-formed but asks for something that makes no sense (e.g. merge into itself)."""

    kind = ServiceErrorKind.INVALID


class InvalidExportError(GraphServiceError):
    """An uploaded export is not a `regraph.graph/v1` document, or names techniques with refused names."""

    kind = ServiceErrorKind.UNPROCESSABLE


class GraphConflictError(GraphServiceError):
    """The request conflicts with the graph's current state (a name taken, a graph not empty...)."""

    kind = ServiceErrorKind.CONFLICT


class GraphUnavailableError(GraphServiceError):
    """The graph database or the embedding model did not answer."""

    kind, retry_after_s = ServiceErrorKind.UNAVAILABLE, 5


class InvalidApiKeyError(GraphServiceError):
    """A token matches no live API key."""

    kind = ServiceErrorKind.UNAUTHORIZED


class QueryRefusedError(GraphServiceError):
    """A Cypher query writes, administers or escapes the read-only sandbox."""

    kind, error_type = ServiceErrorKind.INVALID, "cypher_refused"


class QueryFailedError(GraphServiceError):
    """A read-only Cypher query failed (syntax, types...)."""

    kind, error_type = ServiceErrorKind.INVALID, "cypher_error"


class QueryTimedOutError(QueryFailedError):
    """A read-only Cypher query ran past its time limit."""

    error_type = "cypher_timeout"


class QueryAnswerTooLargeError(QueryFailedError):
    """A read-only Cypher query's answer (its first row alone) is over the response limit."""

    kind, error_type = ServiceErrorKind.TOO_LARGE, "cypher_answer_too_large"


@contextmanager
def translated() -> Iterator[None]:
    """Store, search and embedding errors as service errors (the one place that maps them)."""
    try:
        yield
    except (
        TechniqueNotFoundError,
        ExampleNotFoundError,
        TransitionNotFoundError,
        DecisionNotFoundError,
        AuditEntryNotFoundError,
    ) as e:
        raise UnknownResourceError(str(e)) from e
    except ApiKeyNotFoundError as e:
        raise UnknownResourceError(str(e)) from e
    except (TechniqueExistsError, ImportConflictError, InvalidOperationError) as e:
        raise GraphConflictError(str(e)) from e
    except StoreUnavailableError as e:
        raise GraphUnavailableError(str(e)) from e
    except EmbeddingError as e:
        raise GraphUnavailableError(f"the embedding model failed: {e}") from e
    except KnowledgeError as e:
        raise GraphUnavailableError(str(e)) from e
    except GraphDBError as e:
        raise GraphServiceError(str(e)) from e
