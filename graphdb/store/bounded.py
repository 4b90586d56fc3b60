"""`BoundedGraphStore`: the routes' store, every call bounded in time whether Neo4j is slow or silent.

Each read transaction carries `timeout_s` as a server-side limit, each write `write_timeout_s` (the
store's own mechanism: Neo4j stops the transaction, rolls it back, and the call raises
`StoreTimeoutError`). A server that accepts connections but answers nothing (a stopped process, a lost
network) cannot stop anything, and the driver would wait for its socket for minutes: so each call of
the `GraphStore` protocol runs in a thread of its own and the caller stops waiting `backstop_s`
(`GRAPH_BACKSTOP_S`) after the limit, with `StoreTimeoutError` ("not answering"), leaving the thread to
end when the driver gives up. At most 64 such threads exist at once; past that, calls wait for one
within the same deadline.

A call given up that way goes on in its thread until the driver gives up too, retried on a retryable
error as every call is (`graphdb.retry`), but quietly: its retries' warnings are logged at DEBUG once
its caller has given up (the caller logged "graph database not answering" and has answered; an operator
who wants them sets `graphdb.retry` to DEBUG). Such a thread
can outlive its caller by seconds: the unit test's calls to a server that never answers failed when it
closed their connections at the test's end and logged their retry a second later, after the test (the
likely source of session 32's "--- Logging error ---", a given-up create_api_key's retry logged after
pytest had closed its stream, at the end of a rehearsal).

A write given up that way may be anywhere: not yet sent, waiting, or its commit sent and the answer
lost. Its error says that whether it was applied is unknown. What can be undone is: when the database
answers again, a write whose work is still running when the caller has given up is rolled back instead
of committed (`graphdb.store.base.WRITE_GIVEN_UP`), so only a write whose commit had already gone out
can still land.

Only the protocol's public methods are bounded (each one as a whole: a write and the read of its
result share one deadline); `READS` and `WRITES` name them all, which a unit test holds against the
protocol, so a method added to `GraphStore` cannot be left unbounded.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from neo4j import Driver

from graphdb import retry
from graphdb.errors import StoreTimeoutError
from graphdb.models import GraphExport
from graphdb.store.base import WRITE_GIVEN_UP
from graphdb.store.neo4j import Neo4jGraphStore

logger = logging.getLogger(__name__)
T = TypeVar("T")

GRAPH_BACKSTOP_S = 5.0
"""How much longer than its server-side limit a call waits for a graph read or write before giving up
on it: Neo4j checks transaction timeouts every 2 s (db.transaction.monitor.check.interval), plus the
round trip."""
EXPORT_READ_TIMEOUT_S = 600.0  # a whole-graph export (admin only): minutes on a 100k-example graph
IMPORT_WRITE_TIMEOUT_S = 600.0  # a whole-graph import (admin only), one transaction: ~150 s for 100k examples

_GRAPH_CALLS = threading.BoundedSemaphore(64)  # bounded calls in flight, stuck ones included
# True inside a bounded call's thread: a protocol method that calls another (a write reading back its
# result) runs it there, under the outer call's deadline, instead of in a thread of its own.
_IN_BOUNDED_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "regraph_in_bounded_call", default=False
)
# In a bounded call's thread: the event its caller sets when it gives up waiting for the call.
_CALL_GIVEN_UP: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "regraph_call_given_up", default=None
)


class _QuietOnceGivenUp(logging.Filter):
    """Lowers a record logged in a bounded call's thread to DEBUG once the call's caller has given up on
    it: kept where ``graphdb.retry`` logs DEBUG, dropped elsewhere."""

    def filter(self, record: logging.LogRecord) -> bool:
        given_up = _CALL_GIVEN_UP.get()
        if given_up is None or not given_up.is_set():
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return retry.logger.isEnabledFor(logging.DEBUG)


retry.logger.addFilter(_QuietOnceGivenUp())

WRITES = frozenset(
    {
        "create_technique",
        "rename_technique",
        "describe_technique",
        "merge_techniques",
        "ingest",
        "set_review_status",
        "delete_example",
        "move_example",
        "undo_decision",
        "resolve_decision",
        "keep_separate",
        "undo_keep_separate",
        "undo_merge",
        "create_api_key",
        "revoke_api_key",
        "import_graph",
    }
)
"""The protocol methods that write: bounded by `write_timeout_s`, rolled back when given up."""
READS = frozenset(
    {
        "verified_speedups",
        "get_transition",
        "get_technique",
        "find_technique_by_label",
        "list_techniques",
        "technique_names",
        "list_transitions",
        "best_examples_into",
        "busiest_transitions",
        "technique_links",
        "transitions_of",
        "get_example",
        "list_examples",
        "list_example_summaries",
        "review_queue_page",
        "is_trajectory_ingested",
        "list_trajectories",
        "successors",
        "similar_examples",
        "nearest_techniques",
        "search_techniques_text",
        "list_queue",
        "count_queue",
        "list_kept_separate",
        "list_audit",
        "list_decisions",
        "get_decision",
        "lookup_api_key",
        "list_api_keys",
        "counts",
        "export_graph",
    }
)
"""The protocol methods that only read: bounded by `timeout_s`."""
WHOLE_GRAPH = frozenset({"export_graph", "import_graph"})
"""Held to `EXPORT_READ_TIMEOUT_S` / `IMPORT_WRITE_TIMEOUT_S` instead of a route's limits."""


class BoundedGraphStore(Neo4jGraphStore):
    """`Neo4jGraphStore` with every protocol call bounded in time (see the module's docstring)."""

    def __init__(
        self,
        driver: Driver,
        database: str,
        *,
        timeout_s: float,
        write_timeout_s: float | None = None,
        backstop_s: float = GRAPH_BACKSTOP_S,
    ) -> None:
        """Reads limited to `timeout_s`, writes to `write_timeout_s` (default: `timeout_s`), on the
        server; the caller gives up `backstop_s` after the limit when the server does not answer."""
        super().__init__(driver, database, timeout_s=timeout_s, write_timeout_s=write_timeout_s)
        self.timeout_s: float = timeout_s
        self.write_timeout_s: float = write_timeout_s if write_timeout_s is not None else timeout_s
        self.backstop_s = backstop_s

    def export_graph(self) -> GraphExport:
        """The whole graph: one read of every technique, transition and example, which on a large graph
        takes far longer than a route's read; it gets `EXPORT_READ_TIMEOUT_S` (and the backstop after
        it) instead of the routes' limit."""
        whole = self._whole_graph()
        return whole._answered_in_time(lambda: Neo4jGraphStore.export_graph(whole))

    def import_graph(self, export: GraphExport, *, actor: str) -> None:
        """A whole export in one write transaction, which on a large graph takes far longer than a
        route's write (~150 s for 100k examples at the measured ingest rate): it gets
        `IMPORT_WRITE_TIMEOUT_S` (and the backstop after it) instead of the routes' write limit."""
        whole = self._whole_graph()
        whole._answered_in_time(lambda: Neo4jGraphStore.import_graph(whole, export, actor=actor), write=True)

    def _whole_graph(self) -> BoundedGraphStore:
        """This store with the whole-graph transfers' limits instead of the routes' (never shorter)."""
        return BoundedGraphStore(
            self._driver,
            self._database,
            timeout_s=max(self.timeout_s, EXPORT_READ_TIMEOUT_S),
            write_timeout_s=max(self.write_timeout_s, IMPORT_WRITE_TIMEOUT_S),
            backstop_s=self.backstop_s,
        )

    def _answered_in_time(self, call: Callable[[], T], *, write: bool = False) -> T:
        """`call()`'s answer, run in a thread of its own; `StoreTimeoutError` when none comes in time."""
        if _IN_BOUNDED_CALL.get():  # already in a bounded call's thread, under its deadline
            return call()
        limit_s = self.write_timeout_s if write else self.timeout_s
        deadline_s = limit_s + self.backstop_s
        started = time.monotonic()
        if not _GRAPH_CALLS.acquire(timeout=deadline_s):
            raise self._not_answering(deadline_s, write=write, started=False)
        outcome: list[T] = []
        failure: list[BaseException] = []
        given_up = threading.Event()

        def run() -> None:
            _IN_BOUNDED_CALL.set(True)
            _CALL_GIVEN_UP.set(given_up)
            if write:
                WRITE_GIVEN_UP.set(given_up)
            try:
                outcome.append(call())
            except BaseException as e:  # handed to the caller
                failure.append(e)
            finally:
                _GRAPH_CALLS.release()

        context = contextvars.copy_context()  # the request's logging context goes along
        name = "graph-write" if write else "graph-read"
        worker = threading.Thread(target=context.run, args=(run,), name=name, daemon=True)
        worker.start()
        worker.join(timeout=max(0.0, deadline_s - (time.monotonic() - started)))
        if worker.is_alive():
            given_up.set()
            raise self._not_answering(deadline_s, write=write, started=True)
        if failure:
            raise failure[0]
        return outcome[0]

    def _not_answering(self, deadline_s: float, *, write: bool, started: bool) -> StoreTimeoutError:
        logger.warning(
            "graph database not answering",
            extra={"waited_s": deadline_s, "call": "write" if write else "read"},
        )
        if not write:
            return StoreTimeoutError(
                f"the graph database is not answering: no answer within {deadline_s:g} s "
                f"(limit REGRAPH_GRAPH_READ_TIMEOUT_S={self.timeout_s:g} s); try again later"
            )
        outcome = (
            "whether the change was applied is unknown (it is rolled back if it had not reached its "
            "commit when the database answers again): check before repeating it"
            if started
            else "the change was not started: nothing was written"
        )
        return StoreTimeoutError(
            f"the graph database is not answering: no answer to a write within {deadline_s:g} s "
            f"(limit REGRAPH_GRAPH_WRITE_TIMEOUT_S={self.write_timeout_s:g} s); {outcome}; "
            "try again later"
        )


def _bounded(name: str, *, write: bool) -> Callable[..., Any]:
    """`Neo4jGraphStore.<name>` run by `BoundedGraphStore._answered_in_time`."""
    unbounded = getattr(Neo4jGraphStore, name)

    @functools.wraps(unbounded)
    def bounded(self: BoundedGraphStore, *args: Any, **kwargs: Any) -> Any:
        return self._answered_in_time(lambda: unbounded(self, *args, **kwargs), write=write)

    return bounded


for _name in sorted((READS | WRITES) - WHOLE_GRAPH):
    setattr(BoundedGraphStore, _name, _bounded(_name, write=_name in WRITES))
