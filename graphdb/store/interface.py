"""The reasoning graph's store, as one small protocol per aggregate, and `GraphStore`, their union.

Each consumer asks for the protocol of the aggregate it works on (a service of `api/<feature>/`, the
search's `GraphKnowledge`, the graph construction), so what it may touch is in its signature:

| protocol | what | used by |
|---|---|---|
| `TechniqueStore` | techniques, the graph's nodes, and the transitions between them | api/techniques, relabeling |
| `ExampleStore` | the examples on the transitions, their review and the review queue | api/examples |
| `IngestStore` | batches of techniques and examples, and their trajectories | graph construction |
| `RetrievalStore` | ranked reads: successors, similar examples, technique search | api/retrieve, `GraphKnowledge` |
| `CurationStore` | the relabel queue, its resolution, pairs kept apart | api/relabel (with `RelabelStore`) |
| `AuditStore` | audit entries and relabel decisions, and their undo | api/audit |
| `KeyStore` | API keys | api/keys, authentication |
| `TransferStore` | the whole graph: counts, export, import | api/transfer, `graphdb.export`, the seed graph |

`TechniqueStore` and `ExampleStore` share `TransitionReader` (one transition by its ends). A consumer
that spans aggregates names their union (`RelabelStore`, `ConstructionStore`) rather than the whole store.

The implementations are `graphdb.store.Neo4jGraphStore` and `graphdb.store.BoundedGraphStore` (the
routes' store: the same, with every call bounded in time); the store conformance suite
(`tests/integration/graphdb/test_store_conformance.py`) is the suite every implementation must pass.
Errors are those of `graphdb.errors` (all `GraphStoreError`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from graphdb.models import (
    ApiKey,
    AuditEntry,
    Example,
    ExampleSummary,
    GraphExport,
    IngestBatch,
    IngestResult,
    KeptSeparate,
    RelabelDecision,
    RelabelOutcome,
    ReviewQueueFilter,
    ReviewQueuePage,
    ReviewStatus,
    Role,
    ScoredExample,
    ScoredTechnique,
    SuccessorTransition,
    Technique,
    TechniqueLinks,
    TrajectoryRecord,
    Transition,
)
from graphdb.store.retrieval import DEFAULT_SCAN_LIMIT


@runtime_checkable
class TransitionReader(Protocol):
    """Reads one transition by its ends (what techniques and examples both need)."""

    def get_transition(self, source: str, target: str) -> Transition:
        """The transition source -> target with its statistics; raises `TransitionNotFoundError`."""
        ...


@runtime_checkable
class TechniqueStore(TransitionReader, Protocol):
    """Techniques, the graph's nodes, and the transitions between them as the graph view reads them."""

    def get_technique(self, name: str) -> Technique:
        """The technique called exactly `name`; raises `TechniqueNotFoundError`."""
        ...

    def find_technique_by_label(self, label: str) -> Technique | None:
        """The technique whose name or one of whose aliases equals `label` ignoring case, if any."""
        ...

    def list_techniques(self, *, limit: int = 100, offset: int = 0) -> list[Technique]:
        """Techniques by name, without their embeddings."""
        ...

    def technique_names(self) -> list[str]:
        """Every technique's name, sorted."""
        ...

    def create_technique(self, technique: Technique, *, actor: str) -> Technique:
        """Add a technique node; raises `TechniqueExistsError` when the name (or an alias) is taken."""
        ...

    def rename_technique(
        self, old: str, new: str, *, actor: str, embedding: list[float] | None = None
    ) -> Technique:
        """Rename a technique, keeping the old name as an alias; its transitions and examples follow."""
        ...

    def describe_technique(
        self, name: str, description: str, *, actor: str, embedding: list[float] | None
    ) -> Technique:
        """Replace a technique's description (and the embedding of its "name: description")."""
        ...

    def merge_techniques(self, source: str, into: str, *, actor: str) -> Technique:
        """Fold `source` into `into`: its transitions and examples move, its names become aliases."""
        ...

    def list_transitions(self, *, limit: int = 1000, offset: int = 0) -> list[Transition]:
        """Transitions ordered by source then target name."""
        ...

    def best_examples_into(self, name: str, limit: int) -> list[Example]:
        """The fastest verified examples (passed, not rejected) of the transitions into `name`."""
        ...

    def busiest_transitions(self, limit: int) -> list[Transition]:
        """The `limit` transitions with the most examples, then by source and target name."""
        ...

    def technique_links(self) -> dict[str, TechniqueLinks]:
        """Every technique's transitions out and in and the examples into it, by name."""
        ...

    def transitions_of(self, name: str) -> list[Transition]:
        """The transitions into and out of technique `name`, by source then target (none if unknown)."""
        ...


@runtime_checkable
class ExampleStore(TransitionReader, Protocol):
    """The examples on the transitions, their review and the review queue."""

    def get_example(self, example_id: str) -> Example:
        """One example with everything, its code embedding included; raises `ExampleNotFoundError`."""
        ...

    def list_examples(
        self,
        *,
        source: str | None = None,
        target: str | None = None,
        status: ReviewStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Example]:
        """Examples of one transition (give both ends) or, with only `status`, all in that status."""
        ...

    def list_example_summaries(
        self, *, status: ReviewStatus, limit: int = 100, offset: int = 0
    ) -> list[ExampleSummary]:
        """Examples in one review status as `list_examples` orders them, without code or reasoning."""
        ...

    def set_review_status(
        self, example_id: str, status: ReviewStatus, *, actor: str, reason: str = ""
    ) -> Example:
        """Approve, reject or reset an example; its transition's statistics follow."""
        ...

    def delete_example(self, example_id: str, *, actor: str) -> None:
        """Delete an example; a transition left without examples is deleted with it."""
        ...

    def move_example(self, example_id: str, *, source: str, target: str, actor: str) -> Example:
        """Split a mislabeled example off to the transition source -> target (created if needed)."""
        ...

    def review_queue_page(
        self, token: str, *, limit: int, selected: str | None, only: ReviewQueueFilter
    ) -> ReviewQueuePage:
        """The review queue's page for `token`'s live key in one read; raises `ApiKeyNotFoundError`."""
        ...


@runtime_checkable
class IngestStore(Protocol):
    """Batches of techniques and examples written at once, and the trajectories they came from."""

    def ingest(self, batch: IngestBatch) -> IngestResult:
        """Write one batch (new techniques, aliases, decisions, examples) atomically and idempotently."""
        ...

    def is_trajectory_ingested(self, trajectory_id: str) -> bool:
        """Whether a trajectory with this content id was committed."""
        ...

    def list_trajectories(self, *, limit: int = 100, offset: int = 0) -> list[TrajectoryRecord]:
        """Ingested trajectories, oldest first."""
        ...

    def verified_speedups(self, source: str, target: str) -> list[float]:
        """The speedups of the verified examples the transition `source -> target`'s statistics count
        ([] without the transition): what a new example is compared with, the distribution hold rule."""
        ...


@runtime_checkable
class RetrievalStore(Protocol):
    """Ranked reads: the transitions out of a technique with the examples closest to a code, the examples
    closest graph-wide, and techniques ranked by embedding or by text."""

    def successors(
        self,
        technique: str,
        embedding: list[float],
        k: int,
        *,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
        nearest: int = 0,
    ) -> list[SuccessorTransition]:
        """Transitions out of `technique` with their top-`k` examples for the query code's embedding.

        Raises `TechniqueNotFoundError`; see `Neo4jGraphStore.successors` for the ranking.
        """
        ...

    def similar_examples(self, embedding: list[float], k: int) -> list[ScoredExample]:
        """The `k` examples (not rejected) whose code before is closest to the query, graph-wide."""
        ...

    def nearest_techniques(self, embedding: list[float], k: int) -> list[ScoredTechnique]:
        """The `k` techniques whose embedding is closest (plain cosine, best first)."""
        ...

    def search_techniques_text(self, query: str, k: int) -> list[ScoredTechnique]:
        """Full-text search over names, aliases and descriptions; `query` is escaped, not parsed."""
        ...


@runtime_checkable
class CurationStore(Protocol):
    """The relabel curation: the queue of undecided names, its resolution, and pairs kept apart."""

    def list_queue(self, *, limit: int = 100, offset: int = 0) -> list[RelabelDecision]:
        """Decisions waiting for a curator (undecided names, flagged decisions), newest first."""
        ...

    def count_queue(self) -> int:
        """How many decisions wait for a curator."""
        ...

    def resolve_decision(self, decision_id: str, *, into: str | None, actor: str) -> RelabelDecision:
        """Settle a queued decision: keep it (`into=None`) or move the name into technique `into`."""
        ...

    def keep_separate(self, first: str, second: str, *, actor: str) -> KeptSeparate:
        """Record that two techniques were reviewed as likely duplicates and are kept apart."""
        ...

    def list_kept_separate(self) -> list[KeptSeparate]:
        """Every pair kept apart, the latest first."""
        ...

    def undo_keep_separate(self, first: str, second: str, *, actor: str) -> None:
        """Forget that a pair was kept apart; raises `InvalidOperationError` when it was not."""
        ...


@runtime_checkable
class AuditStore(Protocol):
    """Who changed what and when (audit entries, relabel decisions), and the undo of a change."""

    def list_audit(self, *, target: str | None = None, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
        """Audit entries, newest first, optionally for one target ("technique:<name>", ...)."""
        ...

    def undo_merge(self, audit_id: str, *, actor: str) -> AuditEntry:
        """Undo the technique merge recorded by audit entry `audit_id`; return the undo's own entry."""
        ...

    def list_decisions(
        self,
        *,
        outcome: RelabelOutcome | None = None,
        include_undone: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[RelabelDecision]:
        """Relabel decisions, newest first; undone ones only when asked."""
        ...

    def get_decision(self, decision_id: str) -> RelabelDecision:
        """One relabel decision; raises `DecisionNotFoundError`."""
        ...

    def undo_decision(self, decision_id: str, *, actor: str) -> RelabelDecision:
        """Reverse a relabel decision (a merge is split back out, a new technique merged away)."""
        ...


@runtime_checkable
class KeyStore(Protocol):
    """API keys: created (token shown once), looked up by token, listed and revoked."""

    def create_api_key(self, name: str, role: Role, *, actor: str) -> tuple[ApiKey, str]:
        """Create a key; return it and its token (shown once: only the token's sha256 is stored)."""
        ...

    def lookup_api_key(self, token: str) -> ApiKey:
        """The live key for `token`; raises `ApiKeyNotFoundError` for unknown or revoked keys."""
        ...

    def list_api_keys(self) -> list[ApiKey]:
        """Every key (hashes only), oldest first."""
        ...

    def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey:
        """Revoke a key (idempotent); raises `ApiKeyNotFoundError`."""
        ...


@runtime_checkable
class TransferStore(Protocol):
    """The whole graph: its size, its export and its import."""

    def counts(self) -> dict[str, int]:
        """Numbers of techniques, transitions and examples."""
        ...

    def export_graph(self) -> GraphExport:
        """Everything in the graph, in a stable order, read in one transaction."""
        ...

    def import_graph(self, export: GraphExport, *, actor: str) -> None:
        """Load an export into a graph without knowledge (else `ImportConflictError`), in one transaction."""
        ...


@runtime_checkable
class GraphStore(
    TechniqueStore,
    ExampleStore,
    IngestStore,
    RetrievalStore,
    CurationStore,
    AuditStore,
    KeyStore,
    TransferStore,
    Protocol,
):
    """The whole reasoning graph: every aggregate's protocol (for what truly spans them all)."""


@runtime_checkable
class RelabelStore(CurationStore, TechniqueStore, ExampleStore, Protocol):
    """What relabel curation reads and writes: its queue and pairs, the techniques, their examples."""


@runtime_checkable
class ConstructionStore(IngestStore, TechniqueStore, TransferStore, Protocol):
    """What graph construction reads and writes: batches in, techniques looked up, the graph's size."""
