"""What the running API holds: the graph server (embedded or external), its driver, the settings."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from neo4j import Driver

from api.limits import Limiter
from api.settings import ApiSettings
from graphdb.connection import GraphServer, GraphServerOptions, Neo4jTarget, open_graph
from graphdb.errors import ImportConflictError, InvalidOperationError
from graphdb.export import import_from_file
from graphdb.models import GraphExport
from graphdb.store import BoundedGraphStore, Neo4jGraphStore, TransferStore
from graphdb.store.bounded import GRAPH_BACKSTOP_S
from search.embeddings import Embedder, shared_embedder
from search.relabel.relabeler import RelabelConfig, RelabelPolicy
from search.relabel.scoring import load_model

if TYPE_CHECKING:
    from api.optimize.service import JobService

logger = logging.getLogger(__name__)
_preloads = itertools.count(1)  # numbers each app's preload thread

__all__ = ["GRAPH_BACKSTOP_S", "AppState", "graph_options", "load_seed_graph", "preload_retrieval"]


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
        acquisition_timeout_s=settings.graph_acquisition_timeout_s,
    )


PRELOAD_WAITS_FOR_SERVING_S = 30.0
"""How long the preload waits for the app to serve before it starts anyway."""


def preload_retrieval(
    store: Neo4jGraphStore, stopping: threading.Event, serving: threading.Event | None = None
) -> None:
    """Fill the process's retrieval cache (run in a background thread; a failure only costs speed).

    With `serving`, it starts once that is set (or after `PRELOAD_WAITS_FOR_SERVING_S`): ~10 CPU
    seconds of reads that would otherwise compete with the last steps of the start-up (issue 31).
    """
    deadline = time.monotonic() + PRELOAD_WAITS_FOR_SERVING_S
    while serving is not None and not serving.wait(0.1) and time.monotonic() < deadline:
        if stopping.is_set():
            return
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


def load_seed_graph(store: TransferStore, path: Path) -> GraphExport | None:
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
    graph_store: BoundedGraphStore | None = None  # the reasoning graph for the routes (graphdb.store.bounded)
    embedder: Embedder | None = None  # code and technique embeddings (loaded once per process)
    preload: threading.Thread | None = None  # fills the retrieval cache after start-up
    stopping: threading.Event = field(default_factory=threading.Event)  # set by close()
    serving: threading.Event = field(default_factory=threading.Event)  # set once ready: the preload starts
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
        """Start or reach Neo4j, migrate (when enabled), load the seed graph; the model loads meanwhile.

        `progress` hears each phase as it begins (the API's start-up reports them, `api/startup.py`);
        an exception it raises (shut-down asked for) stops the opening, and what was opened is closed.
        """
        report = progress or (lambda _phase: None)
        # The model loads in its own thread meanwhile (~5 CPU seconds of imports): readiness does not
        # wait for it, the first search does (issue 31: ready after a restart in ≤ 15 s).
        logger.info("embedding model: loading in the background")
        embedder = shared_embedder(background=True)
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
            if settings.preload_retrieval:
                state.preload = threading.Thread(
                    target=preload_retrieval,
                    args=(graph.store, state.stopping, state.serving),
                    name=f"preload-retrieval-{next(_preloads)}",  # one name per app (logs, tests)
                    daemon=True,
                )
                state.preload.start()
            state.embedder = embedder
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
