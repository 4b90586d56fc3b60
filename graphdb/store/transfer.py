"""The whole graph at once: counts, export to one `GraphExport` and import into a graph without knowledge."""

from __future__ import annotations

import logging
from typing import Any

from neo4j import ManagedTransaction
from pydantic import ValidationError

from graphdb import relabel_queries as rq
from graphdb import store_queries as q
from graphdb.errors import GraphStoreError, ImportConflictError
from graphdb.models import INITIAL_TECHNIQUE, GraphExport, KeptSeparate, TrajectoryRecord, utc_now
from graphdb.store.base import StoreBase
from graphdb.store.records import (
    _audit,
    _audit_props,
    _decision,
    _decision_props,
    _enum_values,
    _example,
    _example_rows,
    _native,
    _props,
    _technique,
    _transition,
)

logger = logging.getLogger(__name__)


class Neo4jTransfer(StoreBase):
    """The whole-graph part of `Neo4jGraphStore`."""

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
                    # API keys are the deployment's credentials, not the graph's knowledge: never exported.
                    api_keys=[],
                    trajectories=[
                        TrajectoryRecord.model_validate(r) for r in rows(q.EXPORT_TRAJECTORIES, "t")
                    ],
                    kept_separate=[
                        KeptSeparate.model_validate(_native(r.data())) for r in tx.run(rq.LIST_KEPT_SEPARATE)
                    ],
                )
            except ValidationError as e:
                raise GraphStoreError(f"the graph holds a record the models refuse: {e}") from e

        return self._read(work)

    @staticmethod
    def _import_kept_separate(tx: ManagedTransaction, export: GraphExport) -> None:
        names = {t.name for t in export.techniques}
        unknown = sorted({n for k in export.kept_separate for n in (k.first, k.second)} - names)
        if unknown:
            raise ImportConflictError(
                f"the export keeps apart techniques it does not hold: {', '.join(map(repr, unknown))}"
            )
        tx.run(rq.IMPORT_KEPT_SEPARATE, rows=[k.model_dump() for k in export.kept_separate]).consume()

    def import_graph(self, export: GraphExport, *, actor: str) -> None:
        """Load an export into a graph without knowledge, all in one transaction.

        The graph must hold no technique other than the initial node, no example, relabel decision or
        trajectory (else `ImportConflictError`). The deployment's API keys and audit log stay: imported
        audit entries whose id already exists are skipped, so nothing is duplicated. API keys in the
        file are never created (a file's author could otherwise choose a working admin key); the caller
        reports how many were ignored. The import itself is recorded in the audit log, in the same
        transaction, under `actor`. An existing initial node is replaced by the exported one.
        """

        def work(tx: ManagedTransaction) -> int:
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
            self._import_kept_separate(tx, export)
            audit_ids = [a.id for a in export.audit]
            known_audit = {r["id"] for r in tx.run(q.EXISTING_AUDIT_IDS, ids=audit_ids)}
            audit = [_audit_props(a) for a in export.audit if a.id not in known_audit]
            tx.run(q.CREATE_AUDIT, rows=audit).consume()
            tx.run(
                q.CREATE_TRAJECTORIES, rows=[_props(t.model_dump()) for t in export.trajectories]
            ).consume()
            self._audit_in(
                tx,
                actor,
                "graph.import",
                "graph",
                techniques=len(export.techniques),
                transitions=len(export.transitions),
                examples=len(export.examples),
                audit_entries=len(audit),
                api_keys_ignored=len(export.api_keys),
            )
            return len(export.audit) - len(audit)

        skipped_audit = self._write(work)
        logger.info(
            "graph imported",
            extra={
                "actor": actor,
                "examples": len(export.examples),
                "audit_entries_kept": skipped_audit,
                "api_keys_ignored": len(export.api_keys),
            },
        )
