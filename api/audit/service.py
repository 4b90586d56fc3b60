"""The audit's logic: who changed what and when (audit entries, relabel decisions) and the undo of a
change (a technique merge, a relabel decision).

No FastAPI here. It asks the store for its `AuditStore` only; errors are `api.graph.errors`'.
"""

from __future__ import annotations

from api.audit.models import AuditEntryPublic, AuditList
from api.graph.errors import translated
from api.relabel.models import DecisionList, DecisionPublic
from graphdb.models import RelabelOutcome
from graphdb.store import AuditStore


class AuditService:
    """The record of changes and their undo, over an `AuditStore`."""

    def __init__(self, store: AuditStore) -> None:
        """Serve `store`."""
        self.store = store

    def list_decisions(
        self, *, outcome: RelabelOutcome | None, include_undone: bool, limit: int, offset: int
    ) -> DecisionList:
        """Relabel decisions, newest first."""
        with translated():
            items = self.store.list_decisions(
                outcome=outcome, include_undone=include_undone, limit=limit, offset=offset
            )
        return DecisionList(items=[DecisionPublic.of(d) for d in items], limit=limit, offset=offset)

    def undo_decision(self, decision_id: str, *, actor: str) -> DecisionPublic:
        """Reverse a relabel decision."""
        with translated():
            return DecisionPublic.of(self.store.undo_decision(decision_id, actor=actor))

    def list_audit(self, *, target: str | None, limit: int, offset: int) -> AuditList:
        """Audit entries, newest first."""
        with translated():
            items = self.store.list_audit(target=target, limit=limit, offset=offset)
        return AuditList(items=[AuditEntryPublic.of(a) for a in items], limit=limit, offset=offset)

    def undo_merge(self, audit_id: str, *, actor: str) -> AuditEntryPublic:
        """Undo the technique merge recorded by audit entry `audit_id`; return the undo's audit entry.

        Unknown entry: `UnknownResourceError`; not a merge, undone already or the graph changed since:
        `GraphConflictError`.
        """
        with translated():
            return AuditEntryPublic.of(self.store.undo_merge(audit_id, actor=actor))
