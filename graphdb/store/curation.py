"""Curation records: the review queue's page, relabel decisions (and undoing them) and the audit log."""

from __future__ import annotations

from typing import Any

from neo4j import ManagedTransaction

from graphdb import relabel_queries as rq
from graphdb import store_queries as q
from graphdb.errors import (
    AuditEntryNotFoundError,
    DecisionNotFoundError,
    InvalidOperationError,
    TechniqueExistsError,
)
from graphdb.models import (
    AuditEntry,
    ExampleSummary,
    KeptSeparate,
    RelabelDecision,
    RelabelOutcome,
    ReviewQueueFilter,
    ReviewQueuePage,
    ReviewStatus,
    Technique,
    transition_key,
    utc_now,
)
from graphdb.store.base import StoreBase
from graphdb.store.keys import hash_token, live_key
from graphdb.store.records import _audit, _decision, _example, _native, _props, _technique, _transition


class Neo4jCuration(StoreBase):
    """The review-queue, relabel-decision and audit part of `Neo4jGraphStore`."""

    def review_queue_page(
        self, token: str, *, limit: int, selected: str | None, only: ReviewQueueFilter
    ) -> ReviewQueuePage:
        """The review queue as `token`'s holder sees it, in one query; raises `ApiKeyNotFoundError`.

        The key is checked in the same query as the data (no cache: a revoked key fails at once), and
        nothing is returned for a key that is unknown or revoked.
        """
        rows = self._rows_autocommit(
            q.REVIEW_QUEUE_PAGE,
            key_hash=hash_token(token),
            status=ReviewStatus.PENDING.value,
            limit=limit,
            selected=selected,
            **only.model_dump(),
        )
        row = rows[0]
        key = live_key(row["key"])
        example = _example(row["example"]) if row["example"] is not None else None
        transition = row["transition"]
        return ReviewQueuePage(
            key=key,
            pending=[ExampleSummary.model_validate(e) for e in row["pending"]],
            example=example,
            transition=(
                _transition(transition, example.source, example.target)
                if transition is not None and example is not None
                else None
            ),
            technique_names=row["names"],
        )

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
                if decision.matched is None or decision.matched == decision.technique:
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

    # -- the review queue --------------------------------------------------------------------------

    def list_queue(self, *, limit: int = 100, offset: int = 0) -> list[RelabelDecision]:
        """Decisions waiting for a curator (undecided names, flagged decisions), newest first."""
        return [_decision(r["d"]) for r in self._rows(rq.LIST_QUEUE, limit=limit, offset=offset)]

    def count_queue(self) -> int:
        """How many decisions wait for a curator."""
        return int(self._rows(rq.COUNT_QUEUE)[0]["n"])

    def resolve_decision(self, decision_id: str, *, into: str | None, actor: str) -> RelabelDecision:
        """Settle a queued decision: keep it as decided (`into=None`) or move the name into technique `into`.

        Moving: when the name had been mapped onto another technique (merged, or a canonical taxonomy
        technique created for it), the examples written under the name are split out and merged into
        `into` (its transitions and examples move, the name becomes an alias of `into`); when the name
        had become a technique of its own, that technique is merged into `into`.
        """

        def work(tx: ManagedTransaction) -> str:
            rows = list(tx.run(q.GET_DECISION, id=decision_id))
            if not rows:
                raise DecisionNotFoundError(f"no relabel decision has id {decision_id!r}")
            decision = _decision(rows[0]["d"])
            if decision.undone_at is not None or decision.resolved_at is not None:
                raise InvalidOperationError(f"decision {decision_id} is not waiting for review any more")
            if decision.outcome is not RelabelOutcome.FLAGGED and not decision.flags:
                raise InvalidOperationError(f"decision {decision_id} is not in the review queue")
            resolution = "accepted"
            if into is not None and into != decision.technique:
                self._require_techniques(tx, [into])
                if decision.candidate != decision.technique:
                    undo = self._recorded_split_merge(tx, decision, into, actor)
                else:
                    self._require_techniques(tx, [decision.technique])
                    undo = self._recorded_merge(tx, decision.technique, into)
                resolution = f"merged:{into}"
                # Undoable like a curator's merge (`undo_merge`), which also puts the decision back.
                undo["decision"] = decision_id
                self._audit_in(
                    tx,
                    actor,
                    "technique.merge",
                    f"technique:{into}",
                    merged=decision.candidate,
                    into=into,
                    examples_moved=len(undo["examples"]),
                    decision=decision_id,
                    undo=undo,
                )
            tx.run(
                rq.MARK_DECISION_RESOLVED, id=decision_id, at=utc_now(), actor=actor, resolution=resolution
            ).consume()
            self._audit_in(
                tx,
                actor,
                "relabel.resolve",
                f"decision:{decision_id}",
                candidate=decision.candidate,
                resolution=resolution,
            )
            return resolution

        self._write(work)
        return self.get_decision(decision_id)

    # -- likely duplicates kept apart ------------------------------------------------------------------

    def keep_separate(self, first: str, second: str, *, actor: str) -> KeptSeparate:
        """Record that a curator reviewed techniques `first` and `second` and keeps them apart.

        Idempotent: keeping a pair apart again keeps the first record. Raises `TechniqueNotFoundError`
        and, for a technique paired with itself, `InvalidOperationError`.
        """
        if first == second:
            raise InvalidOperationError("a technique is never a duplicate of itself")
        low, high = sorted((first, second))

        def work(tx: ManagedTransaction) -> dict[str, object]:
            self._require_techniques(tx, [low, high])
            row = next(
                iter(tx.run(rq.KEEP_SEPARATE, first=low, second=high, actor=actor, at=utc_now()))
            ).data()
            self._audit_in(tx, actor, "technique.keep_separate", f"technique:{low}", other=high)
            return row

        return KeptSeparate.model_validate(_native(self._write(work)))

    def list_kept_separate(self) -> list[KeptSeparate]:
        """Every pair kept apart, the latest first."""
        return [KeptSeparate.model_validate(_native(r)) for r in self._rows(rq.LIST_KEPT_SEPARATE)]

    def undo_keep_separate(self, first: str, second: str, *, actor: str) -> None:
        """Forget that a pair was kept apart (it may be listed as a likely duplicate again).

        Raises `TechniqueNotFoundError`, or `InvalidOperationError` when the pair was not kept apart.
        """
        low, high = sorted((first, second))

        def work(tx: ManagedTransaction) -> None:
            self._require_techniques(tx, [low, high])
            removed = next(iter(tx.run(rq.UNDO_KEEP_SEPARATE, first=low, second=high)))["n"]
            if not removed:
                raise InvalidOperationError(f"{low!r} and {high!r} were not kept separate")
            self._audit_in(tx, actor, "technique.keep_separate_undone", f"technique:{low}", other=high)

        self._write(work)

    def list_audit(self, *, target: str | None = None, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
        """Audit entries, newest first, optionally for one target ("technique:<name>", "example:<id>")."""
        return [_audit(r["a"]) for r in self._rows(q.LIST_AUDIT, target=target, limit=limit, offset=offset)]

    # -- technique merges, recorded so that they can be undone ----------------------------------------

    def merge_techniques(self, source: str, into: str, *, actor: str) -> Technique:
        """Fold technique `source` into `into`: its transitions and examples move, its names become aliases.

        A transition between the two becomes a self-loop on `into` (the graph allows cycles). The audit
        entry ("technique.merge") records under `undo` what the merge changed (the merged technique as it
        was, the aliases of `into` before and after, the touched transitions' statistics before and after,
        each moved example's previous ends), which `undo_merge` restores.
        """
        if source == into:
            raise InvalidOperationError("cannot merge a technique into itself")

        def work(tx: ManagedTransaction) -> Technique:
            self._require_techniques(tx, [source, into])
            undo = self._recorded_merge(tx, source, into)
            self._audit_in(
                tx,
                actor,
                "technique.merge",
                f"technique:{into}",
                merged=source,
                into=into,
                examples_moved=len(undo["examples"]),
                transitions_moved=undo.pop("transitions_moved"),
                undo=undo,
            )
            return _technique(next(iter(tx.run(q.GET_TECHNIQUE, name=into)))["t"])

        return self._write(work)

    def _recorded_merge(self, tx: ManagedTransaction, source: str, into: str) -> dict[str, Any]:
        """`_merge_in`, returning what `undo_merge` needs to reverse it."""
        merged = _technique(next(iter(tx.run(q.GET_TECHNIQUE, name=source)))["t"])
        aliases_before = next(iter(tx.run(q.LOCK_TECHNIQUE, name=into)))["aliases"]
        keys = [r["key"] for r in tx.run(q.TRANSITIONS_OF_TECHNIQUE, name=source)]
        moved = [r.data() for r in tx.run(q.EXAMPLE_IDS_OF_KEYS, keys=keys)]
        after_keys = sorted(
            {
                transition_key(
                    into if m["source"] == source else m["source"],
                    into if m["target"] == source else m["target"],
                )
                for m in moved
            }
        )
        before = self._transition_rows(tx, [*keys, *after_keys])
        self._merge_in(tx, source, into)
        aliases_after = next(iter(tx.run(q.LOCK_TECHNIQUE, name=into)))["aliases"]
        return {
            "technique": merged.model_dump(mode="json"),
            "into_aliases_before": aliases_before,
            "into_aliases_after": aliases_after,
            "transitions_before": before,
            "transitions_after": self._transition_rows(tx, after_keys),
            "examples": sorted(moved, key=lambda m: m["id"]),
            "transitions_moved": len(keys),
        }

    def _recorded_split_merge(
        self, tx: ManagedTransaction, decision: RelabelDecision, into: str, actor: str
    ) -> dict[str, Any]:
        """`_split_out` of the decision's name from the technique it went to, then `_merge_in` into `into`;
        returns what `undo_merge` needs to reverse both (no technique to re-create: the name's own
        technique lived only inside this transaction)."""
        host, label = decision.technique, decision.candidate
        self._require_techniques(tx, [host])
        host_aliases_before = next(iter(tx.run(q.LOCK_TECHNIQUE, name=host)))["aliases"]
        aliases_before = next(iter(tx.run(q.LOCK_TECHNIQUE, name=into)))["aliases"]
        keys = [r["key"] for r in tx.run(q.TRANSITIONS_OF_TECHNIQUE, name=host)]
        moved = []
        for r in tx.run(q.EXAMPLES_OF_KEYS_WITH_LABEL, keys=keys, technique=host, label=label):
            # where `_split_out` then `_merge_in` take it: the end written under the label goes to `into`
            source = into if r["source"] == host and r["source_label"] == label else r["source"]
            target = into if r["target"] == host and r["target_label"] == label else r["target"]
            key_after = transition_key(source, target)
            moved.append(
                {"id": r["id"], "source": r["source"], "target": r["target"], "key_after": key_after}
            )
        touched = sorted(
            {transition_key(m["source"], m["target"]) for m in moved} | {m["key_after"] for m in moved}
        )
        before = self._transition_rows(tx, touched)
        self._split_out(tx, decision, actor)
        self._merge_in(tx, label, into)
        return {
            "technique": None,
            "host": host,
            "host_aliases_before": host_aliases_before,
            "host_aliases_after": next(iter(tx.run(q.LOCK_TECHNIQUE, name=host)))["aliases"],
            "into_aliases_before": aliases_before,
            "into_aliases_after": next(iter(tx.run(q.LOCK_TECHNIQUE, name=into)))["aliases"],
            "transitions_before": before,
            "transitions_after": self._transition_rows(tx, touched),
            "examples": sorted(moved, key=lambda m: m["id"]),
        }

    @staticmethod
    def _transition_rows(tx: ManagedTransaction, keys: list[str]) -> list[dict[str, Any]]:
        rows = []
        for r in tx.run(q.TRANSITIONS_BY_KEYS, keys=sorted(set(keys))):
            t = _transition(r["r"], r["source"], r["target"])
            rows.append({"key": t.key, "source": t.source, "target": t.target, "stats": t.stats.model_dump()})
        return rows

    def undo_merge(self, audit_id: str, *, actor: str) -> AuditEntry:
        """Undo the technique merge of audit entry `audit_id`, exactly, and audit the undo.

        The merged technique comes back as it was (name, description, aliases, embedding, creation),
        `into` gets its previous aliases, the moved examples their previous ends and every touched
        transition its previous statistics. Raises `AuditEntryNotFoundError`, and `InvalidOperationError`
        when the entry is not an undoable merge, was undone already, or the graph changed since
        (a technique renamed, re-created or re-aliased, an example moved, reviewed or added on a
        touched transition): undoing then would not give back the graph as it was.
        """

        def work(tx: ManagedTransaction) -> AuditEntry:
            rows = list(tx.run(q.GET_AUDIT, id=audit_id))
            if not rows:
                raise AuditEntryNotFoundError(f"no audit entry has id {audit_id!r}")
            entry = _audit(rows[0]["a"])
            undo = entry.details.get("undo")
            if entry.action != "technique.merge" or not isinstance(undo, dict):
                raise InvalidOperationError(
                    f"audit entry {audit_id} ({entry.action}) is not a merge recorded with what undo needs"
                )
            source, into = str(entry.details["merged"]), str(entry.details["into"])
            locked = list(tx.run(q.LOCK_TECHNIQUE, name=into))  # serializes two undos of one merge
            if list(tx.run(q.LIST_AUDIT, target=f"audit:{audit_id}", limit=1, offset=0)):
                raise InvalidOperationError(f"the merge of audit entry {audit_id} was undone already")
            self._check_unchanged(tx, source, into, undo, locked)
            if undo["technique"] is not None:
                technique = Technique.model_validate(undo["technique"])
                tx.run(q.CREATE_TECHNIQUES, rows=[_props(technique.model_dump())]).consume()
            tx.run(q.SET_ALIASES, technique=into, aliases=undo["into_aliases_before"]).consume()
            if "host" in undo:  # a queue merge that split the name out of the technique it had gone to
                tx.run(q.SET_ALIASES, technique=undo["host"], aliases=undo["host_aliases_before"]).consume()
            if "decision" in undo:  # a queue merge: the decision waits for review again
                tx.run(rq.MARK_DECISION_UNRESOLVED, id=undo["decision"]).consume()
            moves = [{"id": m["id"], "source": m["source"], "target": m["target"]} for m in undo["examples"]]
            self._retarget(tx, moves, [t["key"] for t in undo["transitions_after"]])
            before = undo["transitions_before"]
            # A transition that had no example is deleted by the recomputes; it comes back, empty.
            self._ensure_transitions(tx, ((t["source"], t["target"]) for t in before))
            tx.run(
                q.SET_TRANSITION_STATS, rows=[{"key": t["key"], "stats": t["stats"]} for t in before]
            ).consume()
            self._write_candidates(tx, [t["key"] for t in before])
            self._audit_in(
                tx,
                actor,
                "technique.merge.undo",
                f"audit:{audit_id}",
                merged=source,
                into=into,
                examples_moved=len(moves),
            )
            return _audit(
                next(iter(tx.run(q.LIST_AUDIT, target=f"audit:{audit_id}", limit=1, offset=0)))["a"]
            )

        return self._write(work)

    def _check_unchanged(
        self, tx: ManagedTransaction, source: str, into: str, undo: dict[str, Any], locked: list[Any]
    ) -> None:
        changed = "the graph changed since this merge, so it cannot be undone exactly: {}"
        if not locked:
            raise InvalidOperationError(changed.format(f"{into!r} is no longer a technique"))
        if list(tx.run(q.GET_TECHNIQUE, name=source)):
            raise InvalidOperationError(changed.format(f"{source!r} is a technique again"))
        if list(locked[0]["aliases"]) != list(undo["into_aliases_after"]):
            raise InvalidOperationError(changed.format(f"the aliases of {into!r} changed"))
        expected = {
            m["id"]: m.get("key_after")
            or transition_key(
                into if m["source"] == source else m["source"],
                into if m["target"] == source else m["target"],
            )
            for m in undo["examples"]
        }
        if "host" in undo and [r["aliases"] for r in tx.run(q.LOCK_TECHNIQUE, name=undo["host"])] != [
            undo["host_aliases_after"]
        ]:
            raise InvalidOperationError(changed.format(f"the aliases of {undo['host']!r} changed"))
        if "decision" in undo:
            rows = list(tx.run(q.GET_DECISION, id=undo["decision"]))
            if not rows or _decision(rows[0]["d"]).resolution != f"merged:{into}":
                raise InvalidOperationError(changed.format("the queue decision was changed"))
        found = {r["id"]: r["key"] for r in tx.run(q.EXAMPLE_KEYS_BY_IDS, ids=sorted(expected))}
        if found != expected:
            raise InvalidOperationError(changed.format("a moved example was deleted or moved again"))
        after = undo["transitions_after"]
        if self._transition_rows(tx, [t["key"] for t in after]) != after:
            raise InvalidOperationError(changed.format("a moved transition's examples or reviews changed"))
