"""Transitions and their examples: ingesting trajectories, reading and curating examples, trajectories."""

from __future__ import annotations

from neo4j import ManagedTransaction

from graphdb import store_queries as q
from graphdb.errors import (
    ExampleNotFoundError,
    InvalidOperationError,
    TechniqueExistsError,
    TechniqueNotFoundError,
    TransitionNotFoundError,
)
from graphdb.models import (
    Example,
    ExampleSummary,
    IngestBatch,
    IngestResult,
    ReviewStatus,
    TechniqueLinks,
    TrajectoryRecord,
    Transition,
    transition_key,
)
from graphdb.store.base import StoreBase
from graphdb.store.records import (
    _decision_props,
    _example,
    _example_rows,
    _native,
    _props,
    _transition,
)


class Neo4jExamples(StoreBase):
    """The transition, example and trajectory part of `Neo4jGraphStore`."""

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

    def verified_speedups(self, source: str, target: str) -> list[float]:
        """The speedups of the verified examples of source -> target ([] without the transition)."""
        rows = self._rows(q.TRANSITION_VERIFIED_SPEEDUPS, source=source, target=target)
        return [float(x) for x in rows[0]["speedups"]] if rows else []

    def list_transitions(self, *, limit: int = 1000, offset: int = 0) -> list[Transition]:
        """Transitions ordered by source then target name."""
        rows = self._rows(q.LIST_TRANSITIONS, limit=limit, offset=offset)
        return [_transition(r["r"], r["source"], r["target"]) for r in rows]

    def best_examples_into(self, name: str, limit: int) -> list[Example]:
        """The fastest verified examples (passed, not rejected) of the transitions into `name`."""
        return [_example(r["e"]) for r in self._rows(q.BEST_EXAMPLES_INTO, name=name, limit=limit)]

    def busiest_transitions(self, limit: int) -> list[Transition]:
        """The `limit` transitions with the most examples, then by source and target name."""
        rows = self._rows(q.BUSIEST_TRANSITIONS, limit=limit)
        return [_transition(r["r"], r["source"], r["target"]) for r in rows]

    def technique_links(self) -> dict[str, TechniqueLinks]:
        """Every technique's transitions out and in and the examples into it, by name."""
        return {
            r["name"]: TechniqueLinks(out_n=r["out_n"], in_n=r["in_n"], examples_in=r["examples_in"])
            for r in self._rows(q.TECHNIQUE_LINK_COUNTS)
        }

    def transitions_of(self, name: str) -> list[Transition]:
        """The transitions into and out of technique `name`, by source then target (none if unknown)."""
        rows = self._rows(q.TRANSITIONS_INTO_AND_OUT_OF, name=name)
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

    def list_example_summaries(
        self, *, status: ReviewStatus, limit: int = 100, offset: int = 0
    ) -> list[ExampleSummary]:
        """Examples in one review status as `list_examples` orders them, without code or reasoning."""
        rows = self._rows(q.LIST_EXAMPLE_SUMMARIES_BY_STATUS, status=status.value, limit=limit, offset=offset)
        return [ExampleSummary.model_validate(r["e"]) for r in rows]

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

    def is_trajectory_ingested(self, trajectory_id: str) -> bool:
        """Whether a trajectory with this content id was committed."""
        return bool(self._rows(q.TRAJECTORY_EXISTS, id=trajectory_id))

    def list_trajectories(self, *, limit: int = 100, offset: int = 0) -> list[TrajectoryRecord]:
        """Ingested trajectories, oldest first."""
        rows = self._rows(q.LIST_TRAJECTORIES, limit=limit, offset=offset)
        return [TrajectoryRecord.model_validate(_native(r["t"])) for r in rows]
