"""The reasoning-graph store: the `GraphStore` interface and its Neo4j implementation.

Storage shape (all common queries are one hop and indexed):

- `(:Technique {name, description, aliases, embedding, created_at, created_by})`;
- `(:Technique)-[:TRANSITION {key, n_examples, n_verified, n_rejected, success_rate, mean_speedup,
  median_speedup}]->(:Technique)`, `key` = "source -> target", plus hidden properties that keep
  retrieval and ingestion bounded whatever a transition's size: `candidate_ids` (the examples retrieval
  ranks, see `successors`), `verified_speedups` (what the statistics are computed from) and
  `candidates_rev` (a revision under which a process may cache what it read of the candidates);
- `(:Example {id, transition_key, source, target, ...})` found through the range index on
  `transition_key`; examples are never linked by relationships, so moving one is a property update;
- `(:RelabelDecision)`, `(:AuditEntry)`, `(:ApiKey)`, `(:Trajectory)` records.

Every mutation runs in one managed write transaction together with its audit entry. Transition
statistics are maintained inside that transaction: added examples are folded in (bounded work), and
curation (review, move, delete, merge) recomputes them from the examples, so they never drift. Embeddings
are computed by callers (`search.embeddings`); the store only stores and compares them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
from neo4j import READ_ACCESS, Driver, ManagedTransaction
from neo4j.exceptions import ConstraintError, Neo4jError, ServiceUnavailable
from neo4j.time import DateTime as Neo4jDateTime
from pydantic import ValidationError

from graphdb import store_queries as q
from graphdb.connection import GraphServer, GraphServerOptions, open_driver
from graphdb.embedded import free_port
from graphdb.errors import GraphDBError
from graphdb.migrations import MigrationRunner
from graphdb.models import (
    EMBEDDING_DIMENSIONS,
    INITIAL_TECHNIQUE,
    ApiKey,
    AuditEntry,
    Example,
    GraphExport,
    IngestBatch,
    IngestResult,
    RelabelDecision,
    RelabelOutcome,
    ReviewStatus,
    Role,
    ScoredExample,
    ScoredTechnique,
    SuccessorTransition,
    Technique,
    TrajectoryRecord,
    Transition,
    TransitionStats,
    Verdict,
    transition_key,
    utc_now,
)
from graphdb.retrieval_cache import CandidateCache, TransitionCandidates
from graphdb.vectors import cosines, pack_vector, unpack_vectors

logger = logging.getLogger(__name__)

T = TypeVar("T")

CANDIDATES_PER_TRANSITION = 32
"""How many retrieval candidates each transition keeps (V004 backfills with the same number)."""

DEFAULT_SCAN_LIMIT = 16
"""How many candidates of one transition retrieval compares with the query code by default.

Bounding this is what keeps the search's per-step call fast on a large graph: the most connected
technique has ~40 successors, each ranking this many candidates (see bench/graph_bench.py); a
transition of at most this many examples is ranked exactly. At most `CANDIDATES_PER_TRANSITION`.
"""


# One cache for every store of the process: the search service builds a store per job
# (api/optimize/service.py), and an entry is keyed by a random revision that no other data can have
# (see graphdb/retrieval_cache.py), so sharing it across stores, drivers and databases is safe.
PROCESS_CANDIDATE_CACHE = CandidateCache()


class GraphStoreError(GraphDBError):
    """Root of the store's errors."""


class TechniqueNotFoundError(GraphStoreError):
    """No technique has this name."""


class TechniqueExistsError(GraphStoreError):
    """A technique with this name already exists."""


class ExampleNotFoundError(GraphStoreError):
    """No example has this id."""


class TransitionNotFoundError(GraphStoreError):
    """No transition joins these two techniques."""


class DecisionNotFoundError(GraphStoreError):
    """No relabel decision has this id."""


class ApiKeyNotFoundError(GraphStoreError):
    """No API key has this hash or id."""


class InvalidOperationError(GraphStoreError):
    """The operation is well-formed but not possible in the graph's current state."""


class ImportConflictError(GraphStoreError):
    """An import was asked into a graph that is not empty."""


class StoreUnavailableError(GraphStoreError):
    """The database did not answer or failed the query."""


def hash_token(token: str) -> str:
    """The sha256 hex digest under which an API key token is stored and looked up."""
    return hashlib.sha256(token.encode()).hexdigest()


@runtime_checkable
class GraphStore(Protocol):
    """What the service, the construction and the retrieval need from the reasoning graph."""

    # techniques
    def get_technique(self, name: str) -> Technique: ...
    def find_technique_by_label(self, label: str) -> Technique | None: ...
    def list_techniques(self, *, limit: int = 100, offset: int = 0) -> list[Technique]: ...
    def create_technique(self, technique: Technique, *, actor: str) -> Technique: ...
    def rename_technique(
        self, old: str, new: str, *, actor: str, embedding: list[float] | None = None
    ) -> Technique: ...
    def describe_technique(
        self, name: str, description: str, *, actor: str, embedding: list[float] | None
    ) -> Technique: ...
    def merge_techniques(self, source: str, into: str, *, actor: str) -> Technique: ...
    def nearest_techniques(self, embedding: list[float], k: int) -> list[ScoredTechnique]: ...
    def search_techniques_text(self, query: str, k: int) -> list[ScoredTechnique]: ...
    # transitions and examples
    def ingest(self, batch: IngestBatch) -> IngestResult: ...
    def get_transition(self, source: str, target: str) -> Transition: ...
    def list_transitions(self, *, limit: int = 1000, offset: int = 0) -> list[Transition]: ...
    def get_example(self, example_id: str) -> Example: ...
    def list_examples(
        self,
        *,
        source: str | None = None,
        target: str | None = None,
        status: ReviewStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Example]: ...
    def set_review_status(
        self, example_id: str, status: ReviewStatus, *, actor: str, reason: str = ""
    ) -> Example: ...
    def delete_example(self, example_id: str, *, actor: str) -> None: ...
    def move_example(self, example_id: str, *, source: str, target: str, actor: str) -> Example: ...
    # retrieval
    def successors(
        self,
        technique: str,
        embedding: list[float],
        k: int,
        *,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
        nearest: int = 0,
    ) -> list[SuccessorTransition]: ...
    def similar_examples(self, embedding: list[float], k: int) -> list[ScoredExample]: ...
    # relabel decisions, audit, keys, trajectories
    def list_decisions(
        self,
        *,
        outcome: RelabelOutcome | None = None,
        include_undone: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[RelabelDecision]: ...
    def get_decision(self, decision_id: str) -> RelabelDecision: ...
    def undo_decision(self, decision_id: str, *, actor: str) -> RelabelDecision: ...
    def list_audit(
        self, *, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[AuditEntry]: ...
    def create_api_key(self, name: str, role: Role, *, actor: str) -> tuple[ApiKey, str]: ...
    def lookup_api_key(self, token: str) -> ApiKey: ...
    def list_api_keys(self) -> list[ApiKey]: ...
    def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey: ...
    def is_trajectory_ingested(self, trajectory_id: str) -> bool: ...
    def list_trajectories(self, *, limit: int = 100, offset: int = 0) -> list[TrajectoryRecord]: ...
    # whole graph
    def counts(self) -> dict[str, int]: ...
    def export_graph(self) -> GraphExport: ...
    def import_graph(self, export: GraphExport, *, actor: str) -> None: ...


def _native(value: Any) -> Any:
    """Driver values to plain Python (Neo4j datetimes to aware datetimes, recursively)."""
    if isinstance(value, Neo4jDateTime):
        return value.to_native()
    if isinstance(value, dict):
        return {k: _native(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_native(v) for v in value]
    return value


def _props(model_dump: dict[str, Any]) -> dict[str, Any]:
    """Model fields to node properties: enums as strings, None dropped (Neo4j stores no nulls)."""
    return {k: v for k, v in model_dump.items() if v is not None}


def _technique(row: dict[str, Any]) -> Technique:
    return Technique.model_validate({k: v for k, v in _native(row).items() if v is not None})


def _example(row: dict[str, Any]) -> Example:
    return Example.model_validate({k: v for k, v in _native(row).items() if v is not None})


def _retrieved_example(row: dict[str, Any]) -> Example:
    """A row of `store_queries.retrieved_projection` as an example (no driver datetimes to convert)."""
    props = {k: v for k, v in row.items() if v is not None}
    props.pop("similarity", None)
    seconds, micros = props.pop("created_at_s"), props.pop("created_at_us")
    props["created_at"] = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)
    return Example.model_validate(props)


def _retrieved(row: dict[str, Any]) -> ScoredExample:
    """A row of `store_queries.retrieved_projection` with a `similarity` as a scored example."""
    return ScoredExample(example=_retrieved_example(row), similarity=_similarity(row["similarity"]))


def _example_rows(examples: Iterable[Example]) -> list[dict[str, Any]]:
    """Examples as node properties, with their transition key and packed code vector (see graphdb.vectors)."""
    rows = []
    for e in examples:
        row = _enum_values(_props({**e.model_dump(), "transition_key": e.transition_key}))
        if e.code_embedding is not None:
            row["code_vector"] = pack_vector(e.code_embedding)
        rows.append(row)
    return rows


def _transition(row: dict[str, Any], source: str, target: str) -> Transition:
    # `TRANSITION_PUBLIC` holds numbers and the key only: nothing for `_native` to convert.
    stats = TransitionStats.model_validate({k: row[k] for k in q.TRANSITION_STAT_PROPERTIES if k in row})
    return Transition(key=row["key"], source=source, target=target, stats=stats)


def _decision(row: dict[str, Any]) -> RelabelDecision:
    props = _native(row)
    answer = props.pop("judge_answer_json", None)
    props["judge_answer"] = json.loads(answer) if answer is not None else None
    return RelabelDecision.model_validate(props)


def _decision_props(decision: RelabelDecision) -> dict[str, Any]:
    props = decision.model_dump(mode="python", exclude={"judge_answer"})
    if decision.judge_answer is not None:
        props["judge_answer_json"] = json.dumps(decision.judge_answer, sort_keys=True)
    return _props(props)


def _audit(row: dict[str, Any]) -> AuditEntry:
    props = _native(row)
    props["details"] = json.loads(props.pop("details_json", "{}"))
    return AuditEntry.model_validate(props)


def _audit_props(entry: AuditEntry) -> dict[str, Any]:
    props = entry.model_dump(mode="python", exclude={"details"})
    props["details_json"] = json.dumps(entry.details, sort_keys=True, default=str)
    return props


def _enum_values(props: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.value if hasattr(v, "value") else v) for k, v in props.items()}


def _similarity(normalized: float) -> float:
    """Neo4j reports cosine similarity rescaled to [0, 1]; callers see the plain cosine in [-1, 1]."""
    return 2.0 * float(normalized) - 1.0


class Neo4jGraphStore:
    """`GraphStore` over a Neo4j database (embedded or external)."""

    def __init__(
        self, driver: Driver, database: str = "neo4j", *, candidate_cache: CandidateCache | None = None
    ) -> None:
        """Use `driver` (owned by the caller) against `database`, which must be migrated.

        Retrieval keeps what it read of each transition's candidates in `candidate_cache` (by default
        the process's `PROCESS_CANDIDATE_CACHE`); a write makes the old entries unreachable.
        """
        self._driver = driver
        self._database = database
        self.candidate_cache = candidate_cache if candidate_cache is not None else PROCESS_CANDIDATE_CACHE

    # -- plumbing --------------------------------------------------------------------------------------

    def _write(self, work: Callable[[ManagedTransaction], T]) -> T:
        try:
            with self._driver.session(database=self._database, notifications_min_severity="OFF") as session:
                return session.execute_write(work)
        except GraphStoreError:
            raise
        except ConstraintError as e:
            raise InvalidOperationError(f"the change violates a uniqueness rule: {e.message}") from e
        except (Neo4jError, ServiceUnavailable, OSError) as e:
            raise StoreUnavailableError(f"the graph database failed a write: {e}") from e

    def _read(self, work: Callable[[ManagedTransaction], T]) -> T:
        try:
            with self._driver.session(database=self._database, notifications_min_severity="OFF") as session:
                return session.execute_read(work)
        except GraphStoreError:
            raise
        except (Neo4jError, ServiceUnavailable, OSError) as e:
            raise StoreUnavailableError(f"the graph database failed a read: {e}") from e

    def _rows_autocommit(self, cypher: str, /, **params: Any) -> list[dict[str, Any]]:
        """One read query in an auto-commit transaction: one round trip instead of a managed one's two.

        For the hot read paths (the search asks for successors at every step); no retry on transient
        errors, which a single read does not need.
        """
        try:
            with self._driver.session(
                database=self._database, default_access_mode=READ_ACCESS, notifications_min_severity="OFF"
            ) as session:
                # Plain record access: `Record.data()` walks every nested value again, which costs here.
                return [dict(zip(r.keys(), r.values(), strict=True)) for r in session.run(cypher, params)]
        except (Neo4jError, ServiceUnavailable, OSError) as e:
            raise StoreUnavailableError(f"the graph database failed a read: {e}") from e

    def _rows(self, cypher: str, /, **params: Any) -> list[dict[str, Any]]:
        def work(tx: ManagedTransaction) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(cypher, params)]

        return self._read(work)

    @staticmethod
    def _audit_in(tx: ManagedTransaction, actor: str, action: str, target: str, **details: Any) -> None:
        entry = AuditEntry(
            id=uuid.uuid4().hex, actor=actor, action=action, target=target, details=details, at=utc_now()
        )
        tx.run(q.CREATE_AUDIT, rows=[_audit_props(entry)]).consume()

    @staticmethod
    def _require_techniques(tx: ManagedTransaction, names: Iterable[str]) -> None:
        wanted = sorted(set(names))
        found = {r["name"] for r in tx.run(q.EXISTING_TECHNIQUE_NAMES, names=wanted)}
        missing = [n for n in wanted if n not in found]
        if missing:
            raise TechniqueNotFoundError(f"unknown technique(s): {', '.join(repr(m) for m in missing)}")

    @staticmethod
    def _ensure_transitions(tx: ManagedTransaction, pairs: Iterable[tuple[str, str]]) -> int:
        """Create the missing transitions among `pairs`; return how many were created."""
        rows = [{"source": s, "target": t, "key": transition_key(s, t)} for s, t in sorted(set(pairs))]
        if not rows:
            return 0
        existing = {r["key"] for r in tx.run(q.EXISTING_TRANSITION_KEYS, keys=[r["key"] for r in rows])}
        tx.run(q.ENSURE_TRANSITIONS, rows=rows, at=utc_now()).consume()
        return sum(1 for r in rows if r["key"] not in existing)

    @staticmethod
    def _recompute(tx: ManagedTransaction, keys: Iterable[str]) -> None:
        tx.run(
            q.RECOMPUTE_TRANSITION_STATS, keys=sorted(set(keys)), candidates=CANDIDATES_PER_TRANSITION
        ).consume()

    @classmethod
    def _add_to_stats(cls, tx: ManagedTransaction, added: list[Example]) -> None:
        """Fold newly created examples into their transitions' statistics and candidates.

        The work is bounded by the number of new examples (plus the candidates), not by the size of the
        transitions; a transition without the bookkeeping this needs is recomputed in full instead.
        """
        keys = sorted({e.transition_key for e in added})
        legacy = {r["key"] for r in tx.run(q.TRANSITIONS_WITHOUT_UPKEEP, keys=keys)}
        rows: dict[str, dict[str, Any]] = {
            key: {"key": key, "live": 0, "rejected": 0, "speedups": [], "new": []}
            for key in keys
            if key not in legacy
        }
        for e in added:
            row = rows.get(e.transition_key)
            if row is None:
                continue
            if e.review_status == ReviewStatus.REJECTED:
                row["rejected"] += 1
                continue
            row["live"] += 1
            passed = e.verdict == Verdict.PASSED
            # The ranking keys of the candidates (see store_queries._pool_ranking).
            score = float(e.speedup) if passed and e.speedup is not None else -1.0
            row["new"].append({"id": e.id, "at": e.created_at, "score": score})
            if passed and e.speedup is not None:
                row["speedups"].append(float(e.speedup))
        if rows:
            tx.run(
                q.ADD_TO_TRANSITION_STATS, rows=list(rows.values()), candidates=CANDIDATES_PER_TRANSITION
            ).consume()
        if legacy:
            cls._recompute(tx, legacy)

    @staticmethod
    def _write_candidates(tx: ManagedTransaction, keys: Iterable[str]) -> None:
        tx.run(q.SET_CANDIDATE_IDS, keys=sorted(set(keys)), candidates=CANDIDATES_PER_TRANSITION).consume()

    @classmethod
    def _retarget(cls, tx: ManagedTransaction, moves: list[dict[str, str]], old_keys: Iterable[str]) -> None:
        """Move examples (id, source, target) to their new transitions and fix every touched statistic."""
        for move in moves:
            move["key"] = transition_key(move["source"], move["target"])
        cls._ensure_transitions(tx, ((m["source"], m["target"]) for m in moves))
        tx.run(q.RETARGET_EXAMPLES, rows=moves).consume()
        cls._recompute(tx, [*old_keys, *(m["key"] for m in moves)])

    # -- techniques ------------------------------------------------------------------------------------

    def get_technique(self, name: str) -> Technique:
        """The technique called exactly `name`; raises `TechniqueNotFoundError`."""
        rows = self._rows(q.GET_TECHNIQUE, name=name)
        if not rows:
            raise TechniqueNotFoundError(f"no technique is called {name!r}")
        return _technique(rows[0]["t"])

    def find_technique_by_label(self, label: str) -> Technique | None:
        """The technique whose name or one of whose aliases equals `label` ignoring case, if any."""
        rows = self._rows(q.FIND_TECHNIQUE_BY_LABEL, label=label)
        return _technique(rows[0]["t"]) if rows else None

    def list_techniques(self, *, limit: int = 100, offset: int = 0) -> list[Technique]:
        """Techniques by name, without their embeddings."""
        return [_technique(r["t"]) for r in self._rows(q.LIST_TECHNIQUES, limit=limit, offset=offset)]

    def create_technique(self, technique: Technique, *, actor: str) -> Technique:
        """Add a technique node; raises `TechniqueExistsError` when the name (or an alias) is taken."""

        def work(tx: ManagedTransaction) -> None:
            for label in (technique.name, *technique.aliases):
                if list(tx.run(q.FIND_TECHNIQUE_BY_LABEL, label=label)):
                    raise TechniqueExistsError(f"a technique is already called (or aliased) {label!r}")
            tx.run(q.CREATE_TECHNIQUES, rows=[_props(technique.model_dump())]).consume()
            self._audit_in(tx, actor, "technique.create", f"technique:{technique.name}")

        self._write(work)
        return self.get_technique(technique.name)

    def rename_technique(
        self, old: str, new: str, *, actor: str, embedding: list[float] | None = None
    ) -> Technique:
        """Rename a technique, keeping the old name as an alias and re-keying its transitions and examples.

        Pass the embedding of the new "name: description" so that relabeling matches the new name.
        """

        def work(tx: ManagedTransaction) -> None:
            self._require_techniques(tx, [old])
            clash = list(tx.run(q.FIND_TECHNIQUE_BY_LABEL, label=new))
            if clash and clash[0]["t"]["name"] != old:
                raise TechniqueExistsError(f"{new!r} already names or aliases {clash[0]['t']['name']!r}")
            edges = [r.data() for r in tx.run(q.TRANSITIONS_OF_TECHNIQUE, name=old)]
            tx.run(q.RENAME_TECHNIQUE, old=old, new=new, embedding=embedding).consume()
            rows = []
            for edge in edges:
                source = new if edge["source"] == old else edge["source"]
                target = new if edge["target"] == old else edge["target"]
                rows.append(
                    {
                        "old": edge["key"],
                        "new": transition_key(source, target),
                        "source": source,
                        "target": target,
                    }
                )
            tx.run(q.RENAME_TRANSITION_KEYS, rows=rows).consume()
            self._audit_in(tx, actor, "technique.rename", f"technique:{new}", old=old, new=new)

        self._write(work)
        return self.get_technique(new)

    def describe_technique(
        self, name: str, description: str, *, actor: str, embedding: list[float] | None
    ) -> Technique:
        """Replace a technique's description (and the embedding of its "name: description")."""

        def work(tx: ManagedTransaction) -> None:
            self._require_techniques(tx, [name])
            tx.run(
                q.SET_TECHNIQUE_DESCRIPTION, name=name, description=description, embedding=embedding
            ).consume()
            self._audit_in(tx, actor, "technique.describe", f"technique:{name}", description=description)

        self._write(work)
        return self.get_technique(name)

    def merge_techniques(self, source: str, into: str, *, actor: str) -> Technique:
        """Fold technique `source` into `into`: its transitions and examples move, its names become aliases.

        A transition between the two becomes a self-loop on `into` (the graph allows cycles).
        """
        if source == into:
            raise InvalidOperationError("cannot merge a technique into itself")

        def work(tx: ManagedTransaction) -> None:
            self._require_techniques(tx, [source, into])
            self._merge_in(tx, source, into)
            self._audit_in(tx, actor, "technique.merge", f"technique:{into}", merged=source, into=into)

        self._write(work)
        return self.get_technique(into)

    @classmethod
    def _merge_in(cls, tx: ManagedTransaction, source: str, into: str) -> None:
        edges = [r.data() for r in tx.run(q.TRANSITIONS_OF_TECHNIQUE, name=source)]
        old_keys = [e["key"] for e in edges]
        moves = [
            {
                "id": r["id"],
                "source": into if r["source"] == source else r["source"],
                "target": into if r["target"] == source else r["target"],
            }
            for r in tx.run(q.EXAMPLE_IDS_OF_KEYS, keys=old_keys)
        ]
        source_row = next(iter(tx.run(q.GET_TECHNIQUE, name=source)))["t"]
        for alias in [source, *(source_row.get("aliases") or [])]:
            tx.run(q.ADD_ALIAS, technique=into, alias=alias).consume()
        cls._retarget(tx, moves, old_keys)
        # Any transition of `source` is empty now and was deleted by the recompute; the node goes too.
        tx.run(q.DELETE_TECHNIQUE, name=source).consume()

    def nearest_techniques(self, embedding: list[float], k: int) -> list[ScoredTechnique]:
        """The `k` techniques whose embedding is closest (plain cosine, best first)."""
        rows = self._rows(q.NEAREST_TECHNIQUES, embedding=embedding, k=k)
        return [ScoredTechnique(technique=_technique(r["t"]), score=_similarity(r["score"])) for r in rows]

    def search_techniques_text(self, query: str, k: int) -> list[ScoredTechnique]:
        """Full-text (Lucene) search over names, aliases and descriptions; `query` is escaped, not parsed."""
        if not any(ch.isalnum() for ch in query):
            return []
        escaped = _lucene_escape(query)
        rows = self._rows(q.FULLTEXT_TECHNIQUES, query=escaped, k=k)
        return [ScoredTechnique(technique=_technique(r["t"]), score=float(r["score"])) for r in rows]

    # -- transitions and examples ----------------------------------------------------------------------

    def ingest(self, batch: IngestBatch) -> IngestResult:
        """Write one batch (a trajectory's new techniques, aliases, decisions and examples) atomically.

        Idempotent: a batch whose trajectory is already recorded changes nothing, and examples whose id
        exists are skipped. Techniques the examples name must exist or be created by the batch.
        """

        def work(tx: ManagedTransaction) -> IngestResult:
            if batch.trajectory is not None and list(tx.run(q.TRAJECTORY_EXISTS, id=batch.trajectory.id)):
                return IngestResult(already_ingested=True)
            result = IngestResult()
            if batch.new_techniques:
                names = [t.name for t in batch.new_techniques]
                clash = {r["name"] for r in tx.run(q.EXISTING_TECHNIQUE_NAMES, names=names)}
                if clash:
                    raise TechniqueExistsError(f"technique(s) already exist: {sorted(clash)}")
                tx.run(
                    q.CREATE_TECHNIQUES, rows=[_props(t.model_dump()) for t in batch.new_techniques]
                ).consume()
                result.techniques_created = len(names)
            for addition in batch.aliases:
                if not list(tx.run(q.ADD_ALIAS, technique=addition.technique, alias=addition.alias)):
                    raise TechniqueNotFoundError(f"no technique is called {addition.technique!r}")
            if batch.decisions:
                tx.run(q.CREATE_DECISIONS, rows=[_decision_props(d) for d in batch.decisions]).consume()
            ids = [e.id for e in batch.examples]
            existing = {r["id"] for r in tx.run(q.EXISTING_EXAMPLE_IDS, ids=ids)} if ids else set()
            fresh: dict[str, Example] = {}
            for example in batch.examples:
                if example.id not in existing and example.id not in fresh:
                    fresh[example.id] = example
            result.examples_skipped = len(batch.examples) - len(fresh)
            if fresh:
                self._require_techniques(tx, {n for e in fresh.values() for n in (e.source, e.target)})
                result.transitions_created = self._ensure_transitions(
                    tx, ((e.source, e.target) for e in fresh.values())
                )
                tx.run(q.CREATE_EXAMPLES, rows=_example_rows(fresh.values())).consume()
                self._add_to_stats(tx, list(fresh.values()))
            result.examples_created = len(fresh)
            if batch.trajectory is not None:
                tx.run(q.CREATE_TRAJECTORIES, rows=[_props(batch.trajectory.model_dump())]).consume()
            if batch.trajectory is not None or batch.new_techniques or batch.aliases:
                target = f"trajectory:{batch.trajectory.id}" if batch.trajectory else "graph"
                self._audit_in(
                    tx,
                    batch.actor,
                    "graph.ingest",
                    target,
                    examples=result.examples_created,
                    techniques=result.techniques_created,
                    transitions=result.transitions_created,
                )
            return result

        return self._write(work)

    def get_transition(self, source: str, target: str) -> Transition:
        """The transition source -> target with its statistics; raises `TransitionNotFoundError`."""
        rows = self._rows(q.GET_TRANSITION, source=source, target=target)
        if not rows:
            raise TransitionNotFoundError(f"no transition {transition_key(source, target)!r}")
        return _transition(rows[0]["r"], rows[0]["source"], rows[0]["target"])

    def list_transitions(self, *, limit: int = 1000, offset: int = 0) -> list[Transition]:
        """Transitions ordered by source then target name."""
        rows = self._rows(q.LIST_TRANSITIONS, limit=limit, offset=offset)
        return [_transition(r["r"], r["source"], r["target"]) for r in rows]

    def get_example(self, example_id: str) -> Example:
        """One example with everything, its code embedding included; raises `ExampleNotFoundError`."""
        rows = self._rows(q.GET_EXAMPLE, id=example_id)
        if not rows:
            raise ExampleNotFoundError(f"no example has id {example_id!r}")
        return _example(rows[0]["e"])

    def list_examples(
        self,
        *,
        source: str | None = None,
        target: str | None = None,
        status: ReviewStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Example]:
        """Examples of one transition (give both ends) or, with only `status`, all examples in that status."""
        status_value = status.value if status is not None else None
        if source is not None and target is not None:
            rows = self._rows(
                q.LIST_EXAMPLES_OF_TRANSITION,
                key=transition_key(source, target),
                status=status_value,
                limit=limit,
                offset=offset,
            )
        elif source is None and target is None and status_value is not None:
            rows = self._rows(q.LIST_EXAMPLES_BY_STATUS, status=status_value, limit=limit, offset=offset)
        else:
            raise InvalidOperationError("list examples of one transition (source and target) or by status")
        return [_example(r["e"]) for r in rows]

    def set_review_status(
        self, example_id: str, status: ReviewStatus, *, actor: str, reason: str = ""
    ) -> Example:
        """Approve, reject or reset an example; its transition's statistics follow."""

        def work(tx: ManagedTransaction) -> None:
            rows = list(tx.run(q.SET_REVIEW_STATUS, id=example_id, status=status.value, reason=reason))
            if not rows:
                raise ExampleNotFoundError(f"no example has id {example_id!r}")
            self._recompute(tx, [rows[0]["key"]])
            self._audit_in(tx, actor, f"example.{status.value}", f"example:{example_id}", reason=reason)

        self._write(work)
        return self.get_example(example_id)

    def delete_example(self, example_id: str, *, actor: str) -> None:
        """Delete an example; a transition left without examples is deleted with it."""

        def work(tx: ManagedTransaction) -> None:
            rows = list(tx.run(q.DELETE_EXAMPLE, id=example_id))
            if not rows:
                raise ExampleNotFoundError(f"no example has id {example_id!r}")
            self._recompute(tx, [rows[0]["key"]])
            self._audit_in(tx, actor, "example.delete", f"example:{example_id}", transition=rows[0]["key"])

        self._write(work)

    def move_example(self, example_id: str, *, source: str, target: str, actor: str) -> Example:
        """Split a mislabeled example off to the transition source -> target (created if needed)."""

        def work(tx: ManagedTransaction) -> None:
            rows = list(tx.run(q.GET_EXAMPLE, id=example_id))
            if not rows:
                raise ExampleNotFoundError(f"no example has id {example_id!r}")
            self._require_techniques(tx, [source, target])
            old = rows[0]["e"]
            old_key = transition_key(old["source"], old["target"])
            self._retarget(tx, [{"id": example_id, "source": source, "target": target}], [old_key])
            self._audit_in(
                tx,
                actor,
                "example.move",
                f"example:{example_id}",
                old=old_key,
                new=transition_key(source, target),
            )

        self._write(work)
        return self.get_example(example_id)

    # -- retrieval -------------------------------------------------------------------------------------

    def successors(
        self,
        technique: str,
        embedding: list[float],
        k: int,
        *,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
        nearest: int = 0,
    ) -> list[SuccessorTransition]:
        """Transitions out of `technique` (by target name) with their top-`k` examples for the query code.

        Each transition keeps up to `CANDIDATES_PER_TRANSITION` retrieval candidates: all of its live
        examples when they fit, else its best verified speedups and its most recent examples. The first
        `scan_limit` of them rank by code similarity, then speedup, then id; so a transition of up to
        `scan_limit` examples is ranked exactly and a larger one at a bounded cost. With `nearest` > 0
        the global vector index also offers its `nearest` closest examples of the larger transitions
        (a near-duplicate outside the candidates is then found, for about 10 ms more per call).

        What was read of a transition's candidates (ids, speedups, packed code vectors, and the text of
        those returned) is kept in `candidate_cache` under the transition's revision, which every write
        that changes it renews (see `graphdb.retrieval_cache`). One read then brings the transitions with
        their statistics and revisions, the candidates of those not cached under their current revision,
        and the text of the examples that the cached candidates rank first; all candidates are ranked
        here at once (see `graphdb.vectors`), and a second read brings the text of the chosen examples
        still missing (all of them, when nothing was cached).
        """
        if k <= 0:
            rows, _ = self._successor_rows(technique, scan_limit=0, known=[], texts=[])
            return [
                SuccessorTransition(transition=_transition(r["r"], r["source"], r["target"]), examples=[])
                for r in rows
            ]
        cache = self.candidate_cache
        held = cache.held(technique, scan_limit)
        # Rank the cached candidates now, as if their transitions had not changed since: the text of the
        # examples they would return, where not cached yet, then comes with the same read.
        held_pools = _similarity_pools(list(held.values()), embedding)
        expected = [_top_ids(pool, k) for pool in held_pools]
        texts = {
            i for c, ids in zip(held.values(), expected, strict=True) for i in ids if i not in c.examples
        }
        rows, prefetched = self._successor_rows(
            technique, scan_limit=scan_limit, known=list(held), texts=sorted(texts)
        )
        candidates = self._candidates(technique, scan_limit, rows, held)
        # The same matrices in the same order give the same similarities: no need to compare again.
        unchanged = all(r["cached"] for r in rows) and [r["rev"] for r in rows] == list(held)
        pools = held_pools if unchanged else _similarity_pools(candidates, embedding)
        scanned = min(scan_limit, CANDIDATES_PER_TRANSITION)
        big = [i for i, r in enumerate(rows) if (r["r"].get("n_examples") or 0) > scanned]
        if big and nearest > 0:
            position = {rows[i]["r"]["key"]: i for i in big}
            for hit in self._rows(
                q.SIMILAR_EXAMPLES_IN_KEYS,
                lists={"keys": list(position)},
                embedding=embedding,
                candidates=nearest,
            ):
                pools[position[hit["key"]]].setdefault(
                    hit["id"], (_similarity(hit["score"]), float(hit["speedup"]))
                )
            unchanged = False
        chosen = expected if unchanged else [_top_ids(pool, k) for pool in pools]
        read = {e.id: e for e in map(_retrieved_example, prefetched)}
        found: dict[str, Example] = {}
        for c, ids in zip(candidates, chosen, strict=True):
            found.update((i, c.examples[i]) for i in ids if i in c.examples)
        hits = len(found)
        found.update((i, read[i]) for ids in chosen for i in ids if i in read)
        wanted = sorted({i for ids in chosen for i in ids} - found.keys())
        if wanted:
            more = self._rows_autocommit(q.EXAMPLES_BY_IDS, lists={"ids": wanted})[0]["examples"]
            read.update((e.id, e) for e in map(_retrieved_example, more))
            found.update((i, read[i]) for i in wanted if i in read)
        cache.count_examples(hit=hits, read=len(found) - hits)
        cache.add_examples(
            [(c, [read[i] for i in ids if i in read]) for c, ids in zip(candidates, chosen, strict=True)]
        )
        return [
            SuccessorTransition(
                transition=_transition(row["r"], row["source"], row["target"]),
                # An example deleted between the two reads is left out.
                examples=[ScoredExample(example=found[i], similarity=pool[i][0]) for i in ids if i in found],
            )
            for row, pool, ids in zip(rows, pools, chosen, strict=True)
        ]

    def preload_retrieval(
        self, *, scan_limit: int = DEFAULT_SCAN_LIMIT, k: int = 1, stop: threading.Event | None = None
    ) -> int:
        """Read every technique's successor candidates into `candidate_cache`; the number of techniques.

        What a service does at start so that its first retrieval per technique costs what a later one
        does (the candidates' vectors are the costly part of a first read): one `successors` call per
        technique with a neutral query, which also caches the text of each transition's first example.
        Safe to run beside other calls; a technique removed meanwhile is skipped. Setting `stop` ends
        it after the technique in hand (the caller is about to close the driver).
        """
        names: list[str] = []
        offset, page = 0, 1000
        while batch := self.list_techniques(limit=page, offset=offset):
            names.extend(t.name for t in batch)
            offset += page
        neutral = [1.0 / np.sqrt(EMBEDDING_DIMENSIONS)] * EMBEDDING_DIMENSIONS
        done = 0
        for name in names:
            if stop is not None and stop.is_set():
                break
            try:
                self.successors(name, neutral, k, scan_limit=scan_limit)
            except TechniqueNotFoundError:
                continue
            done += 1
        return done

    def _successor_rows(
        self, technique: str, *, scan_limit: int, known: list[str], texts: list[str]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The successors and examples of `store_queries.SUCCESSORS`; raises `TechniqueNotFoundError`."""
        row = self._rows_autocommit(
            q.SUCCESSORS, name=technique, scan_limit=scan_limit, lists={"known": known, "texts": texts}
        )[0]
        rows: list[dict[str, Any]] = row["successors"]
        if not rows and not self._rows(q.GET_TECHNIQUE, name=technique):
            raise TechniqueNotFoundError(f"no technique is called {technique!r}")
        return rows, row["examples"]

    def _candidates(
        self,
        technique: str,
        scan_limit: int,
        rows: list[dict[str, Any]],
        held: dict[str, TransitionCandidates],
    ) -> list[TransitionCandidates]:
        """Each row's candidates: from `held` when the database left them out, else as read (and cached)."""
        legacy_ids = [i for row in rows if not row["cached"] for i in row["legacy"]]
        legacy: dict[str, Any] = {}
        if legacy_ids:
            # Examples written before `code_vector` existed: their float lists, read separately.
            legacy = dict(
                self._rows_autocommit(q.CODE_EMBEDDINGS_BY_IDS, lists={"ids": legacy_ids})[0]["vectors"]
            )
        fresh = [row for row in rows if not row["cached"]]
        vectors: list[Any] = []
        for row in fresh:
            if row["legacy"]:
                packed, old = iter(row["vectors"]), set(row["legacy"])
                vectors.extend(legacy.get(i) if i in old else next(packed) for i in row["ids"])
            else:
                vectors.extend(row["vectors"])
        # One matrix for every vector read (unpacking is cheaper at once); each transition its own copy.
        matrix, start = unpack_vectors(vectors), 0
        read: list[TransitionCandidates] = []
        for row in fresh:
            end = start + len(row["ids"])
            read.append(
                TransitionCandidates(
                    ids=row["ids"],
                    speedups=[float(x) for x in row["speedups"]],
                    matrix=matrix[start:end].copy(),
                )
            )
            start = end
        self.candidate_cache.remember(
            technique,
            scan_limit,
            [row["rev"] for row in rows if row["rev"] is not None],
            {row["rev"]: c for row, c in zip(fresh, read, strict=True) if row["rev"] is not None},
        )
        built = iter(read)
        out = [held[row["rev"]] if row["cached"] else next(built) for row in rows]
        hits = sum(1 for row in rows if row["cached"])
        self.candidate_cache.count_transitions(hit=hits, read=len(rows) - hits)
        return out

    def similar_examples(self, embedding: list[float], k: int) -> list[ScoredExample]:
        """The `k` examples (not rejected) whose code before is closest to the query, over the whole graph."""
        if k <= 0:
            return []
        rows = self._rows(q.SIMILAR_EXAMPLES, embedding=embedding, k=k, candidates=max(4 * k, 50))
        return [_retrieved(dict(r["e"])) for r in rows]

    # -- relabel decisions -----------------------------------------------------------------------------

    def list_decisions(
        self,
        *,
        outcome: RelabelOutcome | None = None,
        include_undone: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[RelabelDecision]:
        """Relabel decisions, newest first; undone ones only when asked."""
        rows = self._rows(
            q.LIST_DECISIONS,
            outcome=outcome.value if outcome else None,
            include_undone=include_undone,
            limit=limit,
            offset=offset,
        )
        return [_decision(r["d"]) for r in rows]

    def get_decision(self, decision_id: str) -> RelabelDecision:
        """One relabel decision; raises `DecisionNotFoundError`."""
        rows = self._rows(q.GET_DECISION, id=decision_id)
        if not rows:
            raise DecisionNotFoundError(f"no relabel decision has id {decision_id!r}")
        return _decision(rows[0]["d"])

    def undo_decision(self, decision_id: str, *, actor: str) -> RelabelDecision:
        """Reverse a relabel decision.

        A merge is split back out: the candidate becomes its own technique again (with the embedding
        recorded at decision time) and the examples written under that label move to it. A new or
        flagged technique is merged into the technique it was closest to. Exact matches cannot be undone.
        """

        def work(tx: ManagedTransaction) -> None:
            rows = list(tx.run(q.GET_DECISION, id=decision_id))
            if not rows:
                raise DecisionNotFoundError(f"no relabel decision has id {decision_id!r}")
            decision = _decision(rows[0]["d"])
            if decision.undone_at is not None:
                raise InvalidOperationError(f"decision {decision_id} was already undone")
            if decision.outcome is RelabelOutcome.EXACT:
                raise InvalidOperationError("an exact name match is not a relabeling; nothing to undo")
            if decision.outcome is RelabelOutcome.MERGED:
                self._split_out(tx, decision, actor)
            else:
                if decision.matched is None:
                    raise InvalidOperationError(
                        f"decision {decision_id} had no nearest technique to merge {decision.candidate!r} into"
                    )
                self._require_techniques(tx, [decision.technique, decision.matched])
                self._merge_in(tx, decision.technique, decision.matched)
            tx.run(q.MARK_DECISION_UNDONE, id=decision_id, at=utc_now(), actor=actor).consume()
            self._audit_in(
                tx,
                actor,
                "relabel.undo",
                f"decision:{decision_id}",
                candidate=decision.candidate,
                outcome=decision.outcome.value,
                technique=decision.technique,
            )

        self._write(work)
        return self.get_decision(decision_id)

    def _split_out(self, tx: ManagedTransaction, decision: RelabelDecision, actor: str) -> None:
        host, label = decision.technique, decision.candidate
        self._require_techniques(tx, [host])
        if list(tx.run(q.GET_TECHNIQUE, name=label)):
            raise TechniqueExistsError(f"{label!r} is a technique again already")
        technique = Technique(
            name=label,
            description=decision.candidate_description,
            embedding=decision.candidate_embedding,
            created_at=utc_now(),
            created_by=actor,
        )
        tx.run(q.CREATE_TECHNIQUES, rows=[_props(technique.model_dump())]).consume()
        tx.run(q.REMOVE_ALIAS, technique=host, alias=label).consume()
        keys = [e["key"] for e in (r.data() for r in tx.run(q.TRANSITIONS_OF_TECHNIQUE, name=host))]
        moves = []
        for r in tx.run(q.EXAMPLES_OF_KEYS_WITH_LABEL, keys=keys, technique=host, label=label):
            source = label if r["source"] == host and r["source_label"] == label else r["source"]
            target = label if r["target"] == host and r["target_label"] == label else r["target"]
            moves.append({"id": r["id"], "source": source, "target": target})
        self._retarget(tx, moves, keys)

    # -- audit, keys, trajectories ---------------------------------------------------------------------

    def list_audit(self, *, target: str | None = None, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
        """Audit entries, newest first, optionally for one target ("technique:<name>", "example:<id>")."""
        return [_audit(r["a"]) for r in self._rows(q.LIST_AUDIT, target=target, limit=limit, offset=offset)]

    def create_api_key(self, name: str, role: Role, *, actor: str) -> tuple[ApiKey, str]:
        """Create a key; return it and its token (shown once: only the token's sha256 is stored)."""
        token = "rg_" + secrets.token_urlsafe(32)
        key = ApiKey(
            id=uuid.uuid4().hex,
            name=name,
            role=role,
            key_hash=hash_token(token),
            created_at=utc_now(),
            created_by=actor,
        )

        def work(tx: ManagedTransaction) -> None:
            tx.run(q.CREATE_API_KEY, row=_enum_values(_props(key.model_dump()))).consume()
            self._audit_in(tx, actor, "api_key.create", f"api_key:{key.id}", name=name, role=role.value)

        self._write(work)
        return key, token

    def lookup_api_key(self, token: str) -> ApiKey:
        """The live key for `token`; raises `ApiKeyNotFoundError` for unknown or revoked keys."""
        rows = self._rows(q.GET_API_KEY_BY_HASH, key_hash=hash_token(token))
        if not rows:
            raise ApiKeyNotFoundError("unknown API key")
        key = ApiKey.model_validate(_native(rows[0]["k"]))
        if key.revoked_at is not None:
            raise ApiKeyNotFoundError("this API key was revoked")
        return key

    def list_api_keys(self) -> list[ApiKey]:
        """Every key (hashes only), oldest first."""
        return [ApiKey.model_validate(_native(r["k"])) for r in self._rows(q.LIST_API_KEYS)]

    def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey:
        """Revoke a key (idempotent); raises `ApiKeyNotFoundError`."""

        def work(tx: ManagedTransaction) -> dict[str, Any]:
            rows = list(tx.run(q.REVOKE_API_KEY, id=key_id, at=utc_now()))
            if not rows:
                raise ApiKeyNotFoundError(f"no API key has id {key_id!r}")
            self._audit_in(tx, actor, "api_key.revoke", f"api_key:{key_id}")
            return dict(rows[0]["k"])

        return ApiKey.model_validate(_native(self._write(work)))

    def is_trajectory_ingested(self, trajectory_id: str) -> bool:
        """Whether a trajectory with this content id was committed."""
        return bool(self._rows(q.TRAJECTORY_EXISTS, id=trajectory_id))

    def list_trajectories(self, *, limit: int = 100, offset: int = 0) -> list[TrajectoryRecord]:
        """Ingested trajectories, oldest first."""
        rows = self._rows(q.LIST_TRAJECTORIES, limit=limit, offset=offset)
        return [TrajectoryRecord.model_validate(_native(r["t"])) for r in rows]

    # -- whole graph -----------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Numbers of techniques, transitions and examples."""
        row = self._rows(q.COUNTS)[0]
        return {k: int(v) for k, v in row.items()}

    def export_graph(self) -> GraphExport:
        """Everything in the graph, in a stable order, read in one transaction."""

        def work(tx: ManagedTransaction) -> GraphExport:
            def rows(query: str, key: str) -> list[dict[str, Any]]:
                return [_native(r[key]) for r in tx.run(query)]

            try:
                return GraphExport(
                    exported_at=utc_now(),
                    techniques=[_technique(r) for r in rows(q.EXPORT_TECHNIQUES, "t")],
                    transitions=[
                        _transition(r["r"], r["source"], r["target"])
                        for r in (rec.data() for rec in tx.run(q.EXPORT_TRANSITIONS))
                    ],
                    examples=[_example(r) for r in rows(q.EXPORT_EXAMPLES, "e")],
                    decisions=[_decision(r) for r in rows(q.EXPORT_DECISIONS, "d")],
                    audit=[_audit(r) for r in rows(q.EXPORT_AUDIT, "a")],
                    api_keys=[ApiKey.model_validate(r) for r in rows(q.EXPORT_API_KEYS, "k")],
                    trajectories=[
                        TrajectoryRecord.model_validate(r) for r in rows(q.EXPORT_TRAJECTORIES, "t")
                    ],
                )
            except ValidationError as e:
                raise GraphStoreError(f"the graph holds a record the models refuse: {e}") from e

        return self._read(work)

    def import_graph(self, export: GraphExport, *, actor: str) -> None:
        """Load an export into a graph without knowledge, all in one transaction.

        The graph must hold no technique other than the initial node, no example, relabel decision or
        trajectory (else `ImportConflictError`). The deployment's API keys and audit log stay: imported
        keys and audit entries whose id already exists are skipped, so importing over HTTP with the
        admin's own key works and nothing is duplicated. An imported key whose token hash belongs to
        another existing key is a conflict. An existing initial node is replaced by the exported one.
        """

        def work(tx: ManagedTransaction) -> tuple[int, int]:
            held = next(iter(tx.run(q.COUNT_KNOWLEDGE_NODES, initial=INITIAL_TECHNIQUE))).data()
            if any(held.values()):
                found = ", ".join(f"{n} {kind}" for kind, n in held.items() if n)
                raise ImportConflictError(f"import needs a graph without knowledge; this one holds {found}")
            if any(t.name == INITIAL_TECHNIQUE for t in export.techniques):
                tx.run(q.DELETE_TECHNIQUE, name=INITIAL_TECHNIQUE).consume()
            tx.run(q.CREATE_TECHNIQUES, rows=[_props(t.model_dump()) for t in export.techniques]).consume()
            transitions = [
                {
                    "source": t.source,
                    "target": t.target,
                    "props": _props({"key": t.key, **t.stats.model_dump()}),
                }
                for t in export.transitions
            ]
            tx.run(q.IMPORT_TRANSITIONS, rows=transitions).consume()
            for start in range(0, len(export.examples), 1000):
                chunk = export.examples[start : start + 1000]
                tx.run(q.CREATE_EXAMPLES, rows=_example_rows(chunk)).consume()
            self._write_candidates(tx, [t.key for t in export.transitions])
            tx.run(
                q.CREATE_DECISIONS, rows=[_enum_values(_decision_props(d)) for d in export.decisions]
            ).consume()
            audit_ids = [a.id for a in export.audit]
            known_audit = {r["id"] for r in tx.run(q.EXISTING_AUDIT_IDS, ids=audit_ids)}
            audit = [_audit_props(a) for a in export.audit if a.id not in known_audit]
            tx.run(q.CREATE_AUDIT, rows=audit).consume()
            existing = [
                r.data()
                for r in tx.run(
                    q.EXISTING_API_KEYS,
                    ids=[k.id for k in export.api_keys],
                    hashes=[k.key_hash for k in export.api_keys],
                )
            ]
            known_ids = {r["id"] for r in existing}
            hash_owner = {r["key_hash"]: r["id"] for r in existing}
            keys = [k for k in export.api_keys if k.id not in known_ids]
            for key in keys:
                if key.key_hash in hash_owner:
                    raise ImportConflictError(
                        f"imported API key {key.id} has the token of existing key {hash_owner[key.key_hash]}"
                    )
                tx.run(q.CREATE_API_KEY, row=_enum_values(_props(key.model_dump()))).consume()
            tx.run(
                q.CREATE_TRAJECTORIES, rows=[_props(t.model_dump()) for t in export.trajectories]
            ).consume()
            return len(export.audit) - len(audit), len(export.api_keys) - len(keys)

        skipped_audit, skipped_keys = self._write(work)
        # The import itself is audited after the fact, so the imported audit log stays exactly as it was.
        logger.info(
            "graph imported",
            extra={
                "actor": actor,
                "examples": len(export.examples),
                "audit_entries_kept": skipped_audit,
                "api_keys_kept": skipped_keys,
            },
        )


def _similarity_pools(
    candidates: list[TransitionCandidates], embedding: list[float]
) -> list[dict[str, tuple[float, float]]]:
    """Per transition: candidate id -> (cosine with the query, speedup); all compared at once."""
    if not candidates:
        return []
    similarities = iter(cosines(embedding, np.concatenate([c.matrix for c in candidates])))
    return [{i: (next(similarities), s) for i, s in zip(c.ids, c.speedups, strict=True)} for c in candidates]


def _top_ids(pool: dict[str, tuple[float, float]], k: int) -> list[str]:
    """The `k` best of a pool: by similarity, then speedup, then id."""
    # Similarity to 6 digits (float32 precision), so that identical code ties and speedup decides.
    order = sorted(pool.items(), key=lambda item: (-round(item[1][0], 6), -item[1][1], item[0]))
    return [example_id for example_id, _ in order[:k]]


_LUCENE_SPECIAL = set('+-&|!(){}[]^"~*?:\\/')


def _lucene_escape(text: str) -> str:
    return "".join("\\" + ch if ch in _LUCENE_SPECIAL else ch for ch in text)


@contextmanager
def scratch_store(
    *,
    heap_mb: int = 1024,
    pagecache_mb: int = 256,
    prefix: str = "regraph-scratch-",
    candidate_cache: CandidateCache | None = None,
) -> Iterator[Neo4jGraphStore]:
    """A store on a fresh embedded Neo4j in a temporary directory, migrated to the latest schema; the
    server stops and the directory goes when the block ends (benchmarks, seed-graph builds)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        options = GraphServerOptions(
            uri=None,
            user="neo4j",
            password=None,
            database="neo4j",
            data_dir=Path(tmp),
            embedded_port=free_port(),
            embedded_heap_mb=heap_mb,
            embedded_pagecache_mb=pagecache_mb,
        )
        with GraphServer(options) as server, open_driver(server.target) as driver:
            MigrationRunner(driver, server.target.database).migrate()
            yield Neo4jGraphStore(driver, server.target.database, candidate_cache=candidate_cache)
