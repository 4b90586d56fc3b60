"""What the running API holds: the graph server (embedded or external), its driver, the settings."""

from __future__ import annotations

import contextvars
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from neo4j import Driver, ManagedTransaction

from api.limits import Limiter
from api.settings import ApiSettings
from graphdb.connection import GraphServer, GraphServerOptions, Neo4jTarget, open_graph
from graphdb.errors import ImportConflictError, InvalidOperationError, StoreTimeoutError
from graphdb.export import import_from_file
from graphdb.models import GraphExport
from graphdb.store import Neo4jGraphStore
from search.embeddings import Embedder, shared_embedder
from search.relabel.relabeler import RelabelConfig, RelabelPolicy
from search.relabel.scoring import load_model

if TYPE_CHECKING:
    from api.optimize.service import JobService

logger = logging.getLogger(__name__)
_preloads = itertools.count(1)  # numbers each app's preload thread
T = TypeVar("T")


def graph_options(settings: ApiSettings) -> GraphServerOptions:
    """The graph server options that the API settings describe."""
    return GraphServerOptions(
        uri=settings.neo4j_uri,
        user=settings.neo4j_user,
        password=settings.neo4j_password.get_secret_value() if settings.neo4j_password else None,
        database=settings.neo4j_database,
        data_dir=settings.data_dir,
        embedded_port=settings.neo4j_port,
        embedded_heap_mb=settings.neo4j_heap_mb,
        embedded_pagecache_mb=settings.neo4j_pagecache_mb,
    )


def preload_retrieval(store: Neo4jGraphStore, stopping: threading.Event) -> None:
    """Fill the process's retrieval cache (run in a background thread; a failure only costs speed)."""
    started = time.monotonic()
    try:
        techniques = store.preload_retrieval(stop=stopping)
    except Exception as e:  # the API may be closing, or Neo4j gone: retrieval then reads as usual
        logger.warning("retrieval preload stopped: %s", e)
        return
    if stopping.is_set():  # cut short by shut-down: not a preloaded cache
        logger.info("retrieval preload stopped at shut-down", extra={"techniques": techniques})
        return
    stats = store.candidate_cache.stats()
    logger.info(
        "retrieval preloaded",
        extra={
            "techniques": techniques,
            "transitions": stats.entries,
            "mib": round(stats.nbytes / 2**20, 1),
            "seconds": round(time.monotonic() - started, 2),
        },
    )


GRAPH_BACKSTOP_S = 5.0
EXPORT_READ_TIMEOUT_S = 600.0  # a whole-graph export (admin only): minutes on a 100k-example graph
IMPORT_WRITE_TIMEOUT_S = 600.0  # a whole-graph import (admin only), one transaction: ~150 s for 100k examples
"""How much longer than its server-side limit a route waits for a graph read or write before giving up on it:
Neo4j checks transaction timeouts every 2 s (db.transaction.monitor.check.interval), plus the round trip."""
_GRAPH_CALLS = threading.BoundedSemaphore(
    64
)  # graph calls of the routes' store in flight, stuck ones included


class BoundedGraphStore(Neo4jGraphStore):
    """The routes' store: every read and write is bounded, whether Neo4j is slow or does not answer at all.

    Each read transaction carries `timeout_s` as a server-side limit, each write `write_timeout_s`
    (the store's own mechanism: Neo4j stops the transaction, rolls it back, and the call raises
    `StoreTimeoutError`). A server that accepts connections but answers nothing (a stopped process, a
    lost network) cannot stop anything, and the driver would wait for its socket for minutes: so each
    call runs in a thread of its own and the caller stops waiting `GRAPH_BACKSTOP_S` after the limit,
    with `StoreTimeoutError` ("not answering"), leaving the thread to end when the driver gives up.
    At most 64 such threads exist at once; past that, calls wait for one within the same deadline.

    A write given up that way may be anywhere: not yet sent, waiting, or its commit sent and the
    answer lost. Its error says that whether it was applied is unknown. What can be undone is: when the
    database answers again, a write whose work is still running when the caller has given up is rolled
    back instead of committed, so only a write whose commit had already gone out can still land.
    """

    def __init__(
        self, driver: Driver, database: str, *, timeout_s: float, write_timeout_s: float | None = None
    ) -> None:
        super().__init__(driver, database, timeout_s=timeout_s, write_timeout_s=write_timeout_s)
        self.timeout_s: float = timeout_s
        self.write_timeout_s: float = write_timeout_s if write_timeout_s is not None else timeout_s

    def _read(self, work: Callable[[ManagedTransaction], T]) -> T:
        return self._answered_in_time(lambda: super(BoundedGraphStore, self)._read(work))

    def _rows_autocommit(self, cypher: str, /, **params: Any) -> list[dict[str, Any]]:
        return self._answered_in_time(
            lambda: super(BoundedGraphStore, self)._rows_autocommit(cypher, **params)
        )

    def _write(self, work: Callable[[ManagedTransaction], T]) -> T:
        given_up = threading.Event()

        def unless_given_up(tx: ManagedTransaction) -> T:
            result = work(tx)
            if given_up.is_set():  # the caller already answered "unknown": roll back, do not commit
                raise StoreTimeoutError("write given up by its caller before it committed: rolled back")
            return result

        return self._answered_in_time(
            lambda: super(BoundedGraphStore, self)._write(unless_given_up), write=True, given_up=given_up
        )

    def export_graph(self) -> GraphExport:
        """The whole graph: one read of every technique, transition and example, which on a large graph
        takes far longer than a route's read; it gets `EXPORT_READ_TIMEOUT_S` (and the backstop after
        it) instead of the routes' limit."""
        return Neo4jGraphStore.export_graph(self._whole_graph())

    def import_graph(self, export: GraphExport, *, actor: str) -> None:
        """A whole export in one write transaction, which on a large graph takes far longer than a
        route's write (~150 s for 100k examples at the measured ingest rate): it gets
        `IMPORT_WRITE_TIMEOUT_S` (and the backstop after it) instead of the routes' write limit."""
        Neo4jGraphStore.import_graph(self._whole_graph(), export, actor=actor)

    def _whole_graph(self) -> BoundedGraphStore:
        """This store with the whole-graph transfers' limits instead of the routes' (never shorter)."""
        return BoundedGraphStore(
            self._driver,
            self._database,
            timeout_s=max(self.timeout_s, EXPORT_READ_TIMEOUT_S),
            write_timeout_s=max(self.write_timeout_s, IMPORT_WRITE_TIMEOUT_S),
        )

    def _answered_in_time(
        self, call: Callable[[], T], *, write: bool = False, given_up: threading.Event | None = None
    ) -> T:
        limit_s = self.write_timeout_s if write else self.timeout_s
        deadline_s = limit_s + GRAPH_BACKSTOP_S
        started = time.monotonic()
        if not _GRAPH_CALLS.acquire(timeout=deadline_s):
            raise self._not_answering(deadline_s, write=write, started=False)
        outcome: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
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
            if given_up is not None:
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


def load_seed_graph(store: Neo4jGraphStore, path: Path) -> GraphExport | None:
    """Import the seed export when the graph has no technique yet (a fresh database); return what was loaded.

    A missing file or a graph that already holds other records (API keys, audit entries: the import
    wants an empty graph) leaves the graph empty with a warning; a malformed file fails start-up.
    """
    if store.counts()["techniques"] > 0:
        return None
    if not path.is_file():
        logger.warning("seed graph not loaded: no file", extra={"path": str(path)})
        return None
    try:
        export = import_from_file(store, path, actor="seed-graph")
    except (ImportConflictError, InvalidOperationError) as e:
        # Another replica may have seeded it first, or keys were created before the first start.
        logger.warning("seed graph not loaded", extra={"path": str(path), "reason": str(e)})
        return None
    logger.info(
        "seed graph loaded into the empty graph",
        extra={
            "path": str(path),
            "techniques": len(export.techniques),
            "transitions": len(export.transitions),
            "examples": len(export.examples),
        },
    )
    return export


@dataclass
class AppState:
    """Resources opened at start-up and closed at shut-down."""

    settings: ApiSettings
    server: GraphServer
    target: Neo4jTarget
    driver: Driver
    migrations_applied: list[str] = field(default_factory=list)
    jobs: JobService | None = None  # optimization jobs; started in the app's lifespan (needs the loop)
    graph_store: Neo4jGraphStore | None = None  # the reasoning graph for the routes (bounded)
    embedder: Embedder | None = None  # code and technique embeddings (loaded once per process)
    preload: threading.Thread | None = None  # fills the retrieval cache after start-up
    stopping: threading.Event = field(default_factory=threading.Event)  # set by close()
    _relabel_policy: RelabelPolicy | None = None
    _relabel_lock: threading.Lock = field(default_factory=threading.Lock)
    # The slots every face (/v1, /ui, /mcp) takes Cypher queries and evaluations from (api/limits.py).
    limiter: Limiter = field(init=False)

    def __post_init__(self) -> None:
        self.limiter = Limiter.from_settings(self.settings)

    def relabel_policy(self) -> RelabelPolicy:
        """The relabeler's scoring policy (taxonomy and scorer from the settings), built on first use.

        Kept for the process: it caches the embeddings of technique labels across requests.
        """
        with self._relabel_lock:
            if self._relabel_policy is None:
                assert self.embedder is not None
                config = RelabelConfig()
                self._relabel_policy = RelabelPolicy(
                    self.embedder,
                    taxonomy=config.resolved_taxonomy(),
                    model=load_model(config.relabel_model),
                )
            return self._relabel_policy

    @classmethod
    def open(cls, settings: ApiSettings, progress: Callable[[str], None] | None = None) -> AppState:
        """Start or reach Neo4j, migrate (when enabled), load the seed graph and the embedding model.

        `progress` hears each phase as it begins (the API's start-up reports them, `api/startup.py`);
        an exception it raises (shut-down asked for) stops the opening, and what was opened is closed.
        """
        report = progress or (lambda _phase: None)
        graph = open_graph(graph_options(settings), migrate=settings.migrate_on_start, progress=report)
        state = cls(
            settings=settings,
            server=graph.server,
            target=graph.target,
            driver=graph.driver,
            migrations_applied=graph.migrations_applied,
            # The routes' store; start-up, the seed graph and the preload use the unbounded one.
            graph_store=BoundedGraphStore(
                graph.driver,
                graph.target.database,
                timeout_s=settings.graph_read_timeout_s,
                write_timeout_s=settings.graph_write_timeout_s,
            ),
        )
        try:
            if settings.migrate_on_start:
                logger.info(
                    "schema migrated", extra={"applied": ",".join(state.migrations_applied) or "none"}
                )
            if settings.seed_graph is not None:
                report("loading the seed graph")
                load_seed_graph(graph.store, settings.seed_graph)
            report("loading the embedding model")
            if settings.preload_retrieval:
                state.preload = threading.Thread(
                    target=preload_retrieval,
                    args=(graph.store, state.stopping),
                    name=f"preload-retrieval-{next(_preloads)}",  # one name per app (logs, tests)
                    daemon=True,
                )
                state.preload.start()
            state.embedder = shared_embedder()
        except BaseException:
            state.close()
            raise
        return state

    def close(self) -> None:
        self.stopping.set()
        if self.preload is not None:
            self.preload.join(timeout=30)  # it stops after the technique in hand, before the driver goes
        self.driver.close()
        self.server.stop()
