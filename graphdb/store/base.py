"""What every part of the Neo4j store shares: its driver, transactions that translate driver errors,
and the bookkeeping that keeps transition statistics and retrieval candidates true inside a write."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, TypeVar

from neo4j import READ_ACCESS, Driver, ManagedTransaction, Query, unit_of_work
from neo4j.exceptions import ClientError, ConstraintError, Neo4jError, ServiceUnavailable

from graphdb import store_queries as q
from graphdb.errors import (
    GraphStoreError,
    InvalidOperationError,
    StoreTimeoutError,
    StoreUnavailableError,
    TechniqueNotFoundError,
)
from graphdb.models import AuditEntry, Example, ReviewStatus, StepVerdict, transition_key, utc_now
from graphdb.retrieval_cache import CandidateCache
from graphdb.retry import NO_DRIVER_RETRIES, connection_refused, retried
from graphdb.store.records import _audit_props

logger = logging.getLogger(__name__)

T = TypeVar("T")

CANDIDATES_PER_TRANSITION = 32
"""How many retrieval candidates each transition keeps (V004 backfills with the same number)."""


WRITE_GIVEN_UP: ContextVar[threading.Event | None] = ContextVar("regraph_write_given_up", default=None)
"""Set, in the context a write runs in, by a caller that may stop waiting for it (`BoundedGraphStore`):
a write transaction whose work ends after the event is set rolls back instead of committing."""


# One cache for every store of the process: the search service builds a store per job
# (api/optimize/service.py), and an entry is keyed by a random revision that no other data can have
# (see graphdb/retrieval_cache.py), so sharing it across stores, drivers and databases is safe.
PROCESS_CANDIDATE_CACHE = CandidateCache()


def _unless_given_up(
    work: Callable[[ManagedTransaction], T], given_up: threading.Event
) -> Callable[[ManagedTransaction], T]:
    def checked(tx: ManagedTransaction) -> T:
        result = work(tx)
        if given_up.is_set():  # the caller already answered "unknown": roll back, do not commit
            raise StoreTimeoutError("write given up by its caller before it committed: rolled back")
        return result

    return checked


def _unavailable(what: str, e: BaseException) -> StoreUnavailableError:
    if connection_refused(e):  # answered at once, not retried (graphdb.retry)
        return StoreUnavailableError(f"the graph database refused the connection (it is not running): {e}")
    return StoreUnavailableError(f"the graph database failed a {what}: {e}")


class StoreBase:
    """The driver, the transaction plumbing and the in-transaction helpers of `Neo4jGraphStore`."""

    def __init__(
        self,
        driver: Driver,
        database: str = "neo4j",
        *,
        candidate_cache: CandidateCache | None = None,
        timeout_s: float | None = None,
        write_timeout_s: float | None = None,
    ) -> None:
        """Use `driver` (owned by the caller) against `database`, which must be migrated.

        Retrieval keeps what it read of each transition's candidates in `candidate_cache` (by default
        the process's `PROCESS_CANDIDATE_CACHE`); a write makes the old entries unreachable. With
        `timeout_s`, every transaction carries it as a server-side timeout: the server stops one that
        runs longer (lock waits included) and the call raises `StoreTimeoutError`. Write transactions
        carry `write_timeout_s` instead when given; a write the server stopped was rolled back.
        """
        self._driver = driver
        self._database = database
        self.candidate_cache = candidate_cache if candidate_cache is not None else PROCESS_CANDIDATE_CACHE
        self.timeout_s = timeout_s
        self.write_timeout_s = write_timeout_s if write_timeout_s is not None else timeout_s

    @staticmethod
    def _timed(
        work: Callable[[ManagedTransaction], T], limit_s: float | None
    ) -> Callable[[ManagedTransaction], T]:
        return work if limit_s is None else unit_of_work(timeout=limit_s)(work)

    @staticmethod
    def _timeout_error(e: Neo4jError, what: str, limit_s: float | None) -> StoreTimeoutError | None:
        # Neo4j 5 says TransactionTimedOut(ClientConfiguration); a transaction stopped while it waits for
        # a lock says LockClientStopped. Either way the server rolled it back.
        code = e.code or ""
        if limit_s is None or not isinstance(e, ClientError):
            return None
        if "TransactionTimedOut" in code or "LockClientStopped" in code or "Terminated" in code:
            undone = "; it was rolled back: nothing was written" if what == "write" else ""
            return StoreTimeoutError(
                f"the graph database stopped a {what} that ran past its {limit_s:g} s limit{undone}"
            )
        return None

    # -- plumbing --------------------------------------------------------------------------------------

    def _managed(self, work: Callable[[ManagedTransaction], T], limit_s: float | None, *, write: bool) -> T:
        """One try of `work` in a managed transaction: `retried` retries it (not on a refused connection,
        which the driver's own retries would wait out: `graphdb.retry`)."""
        with self._driver.session(
            database=self._database,
            notifications_min_severity="OFF",
            max_transaction_retry_time=NO_DRIVER_RETRIES,
        ) as session:
            timed = self._timed(work, limit_s)
            return session.execute_write(timed) if write else session.execute_read(timed)

    def _write(self, work: Callable[[ManagedTransaction], T]) -> T:
        given_up = WRITE_GIVEN_UP.get()
        if given_up is not None:
            work = _unless_given_up(work, given_up)
        try:
            return retried(lambda: self._managed(work, self.write_timeout_s, write=True))
        except GraphStoreError:
            raise
        except ConstraintError as e:
            raise InvalidOperationError(f"the change violates a uniqueness rule: {e.message}") from e
        except Neo4jError as e:
            raise self._timeout_error(e, "write", self.write_timeout_s) or StoreUnavailableError(
                f"the graph database failed a write: {e}"
            ) from e
        except (ServiceUnavailable, OSError) as e:
            raise _unavailable("write", e) from e

    def _read(self, work: Callable[[ManagedTransaction], T]) -> T:
        try:
            return retried(lambda: self._managed(work, self.timeout_s, write=False))
        except GraphStoreError:
            raise
        except Neo4jError as e:
            raise self._timeout_error(e, "read", self.timeout_s) or StoreUnavailableError(
                f"the graph database failed a read: {e}"
            ) from e
        except (ServiceUnavailable, OSError) as e:
            raise _unavailable("read", e) from e

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
                query = Query(cypher, timeout=self.timeout_s)
                return [dict(zip(r.keys(), r.values(), strict=True)) for r in session.run(query, params)]
        except Neo4jError as e:
            raise self._timeout_error(e, "read", self.timeout_s) or StoreUnavailableError(
                f"the graph database failed a read: {e}"
            ) from e
        except (ServiceUnavailable, OSError) as e:
            raise _unavailable("read", e) from e

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
        # Only the missing ones go to the MERGE: matching an existing relationship between two dense
        # technique nodes costs the server more than the key lookup above (on the graph benchmark this
        # statement was ~7 % of ingestion with every transition of a batch passed in).
        missing = [r for r in rows if r["key"] not in existing]
        if missing:
            tx.run(q.ENSURE_TRANSITIONS, rows=missing, at=utc_now()).consume()
        return len(missing)

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
            if e.held:  # not counted, neither a candidate nor a speedup until a curator approves it
                continue
            row["live"] += 1
            passed = e.verdict == StepVerdict.PASSED
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
