"""The logic behind the graph routes: retrieval, curation, keys, export/import and read-only Cypher.

No FastAPI here. Every operation calls the `GraphStore` (which records who and when for each write in
the same transaction) and raises `GraphServiceError` subclasses, which the routers translate into
HTTP errors. Store and embedding failures are translated here, at the boundary of the library.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from neo4j import Driver
from pydantic import ValidationError

from api.errors import ServiceError, ServiceErrorKind
from api.graph.protocol import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyPublic,
    AuditEntryPublic,
    AuditList,
    CypherRequest,
    CypherResponse,
    DecisionList,
    DecisionPublic,
    ExampleList,
    ExamplePublic,
    ImportSummary,
    MergeRequest,
    RetrieveRequest,
    RetrieveResponse,
    ReviewRequest,
    ScoredExamplePublic,
    SplitRequest,
    SuccessorPublic,
    TechniqueCreate,
    TechniqueHit,
    TechniqueList,
    TechniquePublic,
    TechniqueSearchResponse,
    TechniqueUpdate,
    TransitionList,
    TransitionPublic,
)
from graphdb.cypher_guard import CypherLimits, QueryCancel, run_read_only
from graphdb.errors import (
    ApiKeyNotFoundError,
    AuditEntryNotFoundError,
    CypherGuardError,
    CypherRefusedError,
    CypherTimeoutError,
    CypherUnavailableError,
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
from graphdb.models import (
    ApiKey,
    ExampleSummary,
    GraphExport,
    RelabelOutcome,
    ReviewQueueFilter,
    ReviewQueuePage,
    ReviewStatus,
    Technique,
    TechniqueLinks,
    check_name,
    transition_key,
    utc_now,
)
from graphdb.store import GraphStore
from search.embeddings import Embedder, EmbeddingError, technique_text
from search.errors import KnowledgeError
from search.protocols import INITIAL_TECHNIQUE
from search.retrieval import GraphKnowledge

logger = logging.getLogger(__name__)


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


@contextmanager
def _translated() -> Iterator[None]:
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


def _refuse_initial(name: str, what: str) -> None:
    # The search starts every path at this node by name; renaming or merging it would orphan the graph.
    if name == INITIAL_TECHNIQUE:
        raise InvalidGraphRequestError(f"the initial technique {INITIAL_TECHNIQUE!r} cannot be {what}")


class GraphService:
    """Graph operations for the API, over a store and the embedding model."""

    def __init__(self, store: GraphStore, embedder: Embedder) -> None:
        """Serve `store`, embedding code and technique texts with `embedder`."""
        self.store = store
        self.embedder = embedder

    def _technique_vector(self, name: str, description: str) -> list[float]:
        with _translated():
            return self.embedder.embed_one(technique_text(name, description))

    # -- authentication ------------------------------------------------------------------------------

    def key_for_token(self, token: str) -> ApiKey:
        """The live API key of `token`; raises `InvalidApiKeyError` for an unknown or revoked one."""
        try:
            return self.store.lookup_api_key(token)
        except ApiKeyNotFoundError as e:
            raise InvalidApiKeyError(str(e)) from e
        except StoreUnavailableError as e:
            raise GraphUnavailableError(str(e)) from e

    # -- retrieval -----------------------------------------------------------------------------------

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        """Successors of a technique with their statistics and top-k examples for the request's code."""
        with _translated():
            vector = self.embedder.embed_code([request.code])[0]
            found = self.store.successors(request.technique, vector, request.k)
        return RetrieveResponse(
            technique=request.technique,
            successors=[
                SuccessorPublic(
                    technique=s.transition.target,
                    transition=TransitionPublic.of(s.transition),
                    examples=[ScoredExamplePublic.of(e) for e in s.examples],
                )
                for s in found
            ],
        )

    def search_techniques(self, query: str, k: int) -> TechniqueSearchResponse:
        """Techniques matching free text: full-text and vector rankings fused."""
        if not query.strip():
            raise InvalidGraphRequestError("the search text is empty")
        with _translated():
            hits = GraphKnowledge(self.store, self.embedder).search_techniques(query, k)
        return TechniqueSearchResponse(
            query=query,
            hits=[TechniqueHit(technique=TechniquePublic.of(h.technique), score=h.score) for h in hits],
        )

    # -- techniques ----------------------------------------------------------------------------------

    def list_techniques(self, limit: int, offset: int) -> TechniqueList:
        """A page of techniques by name."""
        with _translated():
            items = self.store.list_techniques(limit=limit, offset=offset)
        return TechniqueList(items=[TechniquePublic.of(t) for t in items], limit=limit, offset=offset)

    def technique_names(self) -> list[str]:
        """Every technique's name, sorted (for pickers: nothing else is read)."""
        with _translated():
            return self.store.technique_names()

    def get_technique(self, name: str) -> TechniquePublic:
        """One technique by exact name."""
        with _translated():
            return TechniquePublic.of(self.store.get_technique(name))

    def create_technique(self, request: TechniqueCreate, *, actor: str) -> TechniquePublic:
        """Add a technique (embedded from "name: description")."""
        technique = Technique(
            name=request.name,
            description=request.description,
            aliases=request.aliases,
            embedding=self._technique_vector(request.name, request.description),
            created_at=utc_now(),
            created_by=actor,
        )
        with _translated():
            return TechniquePublic.of(self.store.create_technique(technique, actor=actor))

    def update_technique(self, name: str, request: TechniqueUpdate, *, actor: str) -> TechniquePublic:
        """Rename and/or describe a technique; its embedding follows the new "name: description"."""
        with _translated():
            current = self.store.get_technique(name)
            new_name = request.name if request.name is not None and request.name != name else None
            if new_name is not None:
                _refuse_initial(name, "renamed")
                # Checked before anything is written, so a clash leaves the description untouched too.
                clash = self.store.find_technique_by_label(new_name)
                if clash is not None and clash.name != name:
                    raise GraphConflictError(f"{new_name!r} already names or aliases {clash.name!r}")
            description = request.description if request.description is not None else current.description
            vector = self._technique_vector(new_name or name, description)
            if new_name is not None:
                self.store.rename_technique(name, new_name, actor=actor, embedding=vector)
            if request.description is not None and request.description != current.description:
                self.store.describe_technique(new_name or name, description, actor=actor, embedding=vector)
            return TechniquePublic.of(self.store.get_technique(new_name or name))

    def merge_techniques(self, request: MergeRequest, *, actor: str) -> TechniquePublic:
        """Fold one technique into another."""
        if request.source == request.into:
            raise InvalidGraphRequestError("cannot merge a technique into itself")
        _refuse_initial(request.source, "merged away")
        _refuse_initial(request.into, "merged into")
        with _translated():
            return TechniquePublic.of(self.store.merge_techniques(request.source, request.into, actor=actor))

    # -- transitions and examples --------------------------------------------------------------------

    def list_transitions(
        self, *, source: str | None, target: str | None, limit: int, offset: int
    ) -> TransitionList:
        """A page of transitions, or the one transition source -> target when both ends are given."""
        if (source is None) != (target is None):
            raise InvalidGraphRequestError("give both source and target, or neither")
        with _translated():
            if source is not None and target is not None:
                items = [self.store.get_transition(source, target)]
            else:
                items = self.store.list_transitions(limit=limit, offset=offset)
        return TransitionList(items=[TransitionPublic.of(t) for t in items], limit=limit, offset=offset)

    def best_examples_into(self, name: str, limit: int) -> list[ExamplePublic]:
        """The fastest verified examples of the transitions into a technique (a technique page)."""
        with _translated():
            return [ExamplePublic.of(e) for e in self.store.best_examples_into(name, limit)]

    def busiest_transitions(self, limit: int) -> list[TransitionPublic]:
        """The transitions with the most examples (the graph view's edges)."""
        with _translated():
            return [TransitionPublic.of(t) for t in self.store.busiest_transitions(limit)]

    def technique_links(self) -> dict[str, TechniqueLinks]:
        """Every technique's transitions out and in and the examples into it, by name."""
        with _translated():
            return self.store.technique_links()

    def transitions_of(self, name: str) -> list[TransitionPublic]:
        """The transitions into and out of one technique (a technique page)."""
        with _translated():
            return [TransitionPublic.of(t) for t in self.store.transitions_of(name)]

    def list_examples(
        self,
        *,
        source: str | None,
        target: str | None,
        status: ReviewStatus | None,
        limit: int,
        offset: int,
    ) -> ExampleList:
        """Examples of one transition (both ends, optionally a status), or every example in a status."""
        if (source is None) != (target is None) or (source is None and status is None):
            raise InvalidGraphRequestError(
                "list the examples of one transition (source and target) or those in one review status"
            )
        with _translated():
            if source is not None and target is not None:
                # An unknown transition is a 404, not an empty page: the caller named something wrong.
                self.store.get_transition(source, target)
            items = self.store.list_examples(
                source=source, target=target, status=status, limit=limit, offset=offset
            )
        return ExampleList(items=[ExamplePublic.of(e) for e in items], limit=limit, offset=offset)

    def list_example_summaries(
        self, *, status: ReviewStatus, limit: int, offset: int
    ) -> list[ExampleSummary]:
        """Examples in one review status, oldest first, without code or reasoning (for lists)."""
        with _translated():
            return self.store.list_example_summaries(status=status, limit=limit, offset=offset)

    def review_queue_page(
        self, token: str, *, limit: int, selected: str | None, only: ReviewQueueFilter
    ) -> ReviewQueuePage:
        """The review queue for the holder of `token`, its key checked in the same read."""
        try:
            return self.store.review_queue_page(token, limit=limit, selected=selected, only=only)
        except ApiKeyNotFoundError as e:
            raise InvalidApiKeyError(str(e)) from e
        except StoreUnavailableError as e:
            raise GraphUnavailableError(str(e)) from e

    def get_example(self, example_id: str) -> ExamplePublic:
        """One example."""
        with _translated():
            return ExamplePublic.of(self.store.get_example(example_id))

    def review_example(self, example_id: str, request: ReviewRequest, *, actor: str) -> ExamplePublic:
        """Approve or reject an example."""
        status = ReviewStatus.APPROVED if request.decision == "approve" else ReviewStatus.REJECTED
        with _translated():
            example = self.store.set_review_status(example_id, status, actor=actor, reason=request.reason)
        return ExamplePublic.of(example)

    def delete_example(self, example_id: str, *, actor: str) -> None:
        """Delete an example (its transition goes too when it was the last one)."""
        with _translated():
            self.store.delete_example(example_id, actor=actor)

    def split_example(self, example_id: str, request: SplitRequest, *, actor: str) -> ExamplePublic:
        """Move a mislabeled example to another transition."""
        with _translated():
            current = self.store.get_example(example_id)
            source = request.source if request.source is not None else current.source
            if transition_key(source, request.target) == current.transition_key:
                raise InvalidGraphRequestError(
                    f"example {example_id} is already on {current.transition_key!r}"
                )
            return ExamplePublic.of(
                self.store.move_example(example_id, source=source, target=request.target, actor=actor)
            )

    # -- relabel decisions and audit -----------------------------------------------------------------

    def list_decisions(
        self, *, outcome: RelabelOutcome | None, include_undone: bool, limit: int, offset: int
    ) -> DecisionList:
        """Relabel decisions, newest first."""
        with _translated():
            items = self.store.list_decisions(
                outcome=outcome, include_undone=include_undone, limit=limit, offset=offset
            )
        return DecisionList(items=[DecisionPublic.of(d) for d in items], limit=limit, offset=offset)

    def undo_decision(self, decision_id: str, *, actor: str) -> DecisionPublic:
        """Reverse a relabel decision."""
        with _translated():
            return DecisionPublic.of(self.store.undo_decision(decision_id, actor=actor))

    def list_audit(self, *, target: str | None, limit: int, offset: int) -> AuditList:
        """Audit entries, newest first."""
        with _translated():
            items = self.store.list_audit(target=target, limit=limit, offset=offset)
        return AuditList(items=[AuditEntryPublic.of(a) for a in items], limit=limit, offset=offset)

    def undo_merge(self, audit_id: str, *, actor: str) -> AuditEntryPublic:
        """Undo the technique merge recorded by audit entry `audit_id`; return the undo's audit entry.

        Unknown entry: `UnknownResourceError`; not a merge, undone already or the graph changed since:
        `GraphConflictError`.
        """
        with _translated():
            return AuditEntryPublic.of(self.store.undo_merge(audit_id, actor=actor))

    # -- keys ----------------------------------------------------------------------------------------

    def create_key(self, request: ApiKeyCreate, *, actor: str) -> ApiKeyCreated:
        """Create an API key; its token is returned this once."""
        with _translated():
            # The audit log records the key's name: two live keys with one name could not be told apart.
            if any(k.name == request.name and k.revoked_at is None for k in self.store.list_api_keys()):
                raise GraphConflictError(f"a live API key is already called {request.name!r}")
            key, token = self.store.create_api_key(request.name, request.role, actor=actor)
        return ApiKeyCreated(**ApiKeyPublic.of(key).model_dump(), token=token)

    def list_keys(self) -> list[ApiKeyPublic]:
        """Every API key, oldest first (without tokens or hashes)."""
        with _translated():
            return [ApiKeyPublic.of(k) for k in self.store.list_api_keys()]

    def revoke_key(self, key_id: str, *, actor: str) -> ApiKeyPublic:
        """Revoke an API key (idempotent)."""
        with _translated():
            return ApiKeyPublic.of(self.store.revoke_api_key(key_id, actor=actor))

    # -- whole graph ---------------------------------------------------------------------------------

    def export_graph(self) -> GraphExport:
        """The whole graph as one `regraph.graph/v1` document."""
        with _translated():
            return self.store.export_graph()

    def import_graph(self, export: GraphExport, *, actor: str) -> ImportSummary:
        """Load an export into an empty graph, after checking that it is self-consistent. API keys in
        the file are never imported (the summary counts them); the import is in the audit log."""
        check_export(export)
        with _translated():
            self.store.import_graph(export, actor=actor)
        logger.info("graph imported over the API", extra={"actor": actor, "examples": len(export.examples)})
        return ImportSummary(
            techniques=len(export.techniques),
            transitions=len(export.transitions),
            examples=len(export.examples),
            decisions=len(export.decisions),
            audit=len(export.audit),
            trajectories=len(export.trajectories),
            api_keys_ignored=len(export.api_keys),
        )

    def import_upload(self, raw: bytes, *, actor: str) -> ImportSummary:
        """Parse an uploaded export file and import it (`import_graph`); raises `InvalidExportError`
        for a file that is not an export."""
        return self.import_graph(parse_export(raw), actor=actor)


def parse_export(raw: bytes) -> GraphExport:
    """The export a file holds; raises `InvalidExportError` naming the first problems otherwise."""
    try:
        return GraphExport.model_validate_json(raw)
    except ValidationError as e:
        shown = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in e.errors()[:5]
        )
        raise InvalidExportError(
            f"that file is not a regraph.graph/v1 export ({e.error_count()} problem(s)): {shown}"
        ) from e


def _duplicates(values: list[str]) -> list[str]:
    return sorted(v for v, n in Counter(values).items() if n > 1)


def check_export(export: GraphExport) -> None:
    """Refuse an export whose parts do not fit together (the store would silently drop such records),
    or whose technique names or aliases could not be created through the API (`check_name`).

    Raises `InvalidExportError` for names, `InvalidGraphRequestError` for the rest, naming the first
    problems found.
    """
    bad_names = []
    for technique in export.techniques:
        for label in (technique.name, *technique.aliases):
            try:
                check_name(label)
            except ValueError as refused:
                bad_names.append(f"{label[:60]!r}: {refused}")
    if bad_names:
        raise InvalidExportError(
            f"the export names techniques with refused names: {'; '.join(bad_names[:5])}"
        )
    problems: list[str] = []
    names = [t.name for t in export.techniques]
    for kind, values in (
        ("technique name", names),
        ("transition key", [t.key for t in export.transitions]),
        ("example id", [e.id for e in export.examples]),
        ("decision id", [d.id for d in export.decisions]),
        ("audit id", [a.id for a in export.audit]),
        ("trajectory id", [t.id for t in export.trajectories]),
    ):
        dupes = _duplicates(values)
        if dupes:
            problems.append(f"duplicate {kind}(s): {', '.join(dupes[:5])}")
    known = set(names)
    keys: set[str] = set()
    for t in export.transitions:
        if t.key != transition_key(t.source, t.target):
            problems.append(f"transition {t.key!r} does not join {t.source!r} and {t.target!r}")
        missing = {t.source, t.target} - known
        if missing:
            problems.append(f"transition {t.key!r} names unknown technique(s) {sorted(missing)}")
        keys.add(t.key)
    for e in export.examples:
        if e.transition_key not in keys:
            problems.append(f"example {e.id} belongs to no transition ({e.transition_key!r})")
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise InvalidGraphRequestError(f"the export is inconsistent, nothing was imported: {shown}")


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
    except CypherGuardError as e:
        raise QueryFailedError(str(e)) from e
    return CypherResponse(
        columns=result.columns, rows=result.rows, truncated=result.truncated, row_limit=result.row_limit
    )
