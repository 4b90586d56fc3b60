"""Where the graph lives: an external Neo4j (NEO4J_URI set) or the embedded one, behind one interface.

`open_graph` is the one way every entry point (the API, the CLI, the benchmarks, the tests) gets a
graph: start or reach the server, open a driver, migrate, and hand back the store over it.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from neo4j import Driver, GraphDatabase
from neo4j.exceptions import AuthError, Neo4jError, ServiceUnavailable
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from graphdb import queries
from graphdb.embedded import EmbeddedConfig, EmbeddedNeo4j, default_cache_dir, free_port
from graphdb.errors import Neo4jUnavailableError
from graphdb.migrations import MigrationRunner
from graphdb.retrieval_cache import CandidateCache
from graphdb.retry import NO_DRIVER_RETRIES, RETRY_TIME_S, connection_refused, retried
from graphdb.store import Neo4jGraphStore

logger = logging.getLogger(__name__)


# The driver's timeouts (see open_driver): a dead server must be noticed well inside two minutes.
CONNECT_TIMEOUT_S = 5.0
ACQUISITION_TIMEOUT_S = 20.0  # the default of REGRAPH_GRAPH_ACQUISITION_TIMEOUT_S (GraphServerOptions)
LIVENESS_CHECK_AFTER_S = 30.0


@dataclass(frozen=True)
class Neo4jTarget:
    """Everything a driver needs to reach one database."""

    uri: str
    user: str
    password: str
    database: str = "neo4j"


@dataclass(frozen=True)
class GraphServerOptions:
    """Where to find (or how to start) the graph database; built from a service's settings."""

    uri: str | None
    user: str
    password: str | None
    database: str
    data_dir: Path
    embedded_port: int
    embedded_heap_mb: int = 1024
    embedded_pagecache_mb: int = 256
    connect_timeout_s: float = 60.0
    cache_dir: Path | None = None
    acquisition_timeout_s: float = ACQUISITION_TIMEOUT_S  # the driver's wait for a connection (open_driver)


class GraphServer:
    """Starts the embedded Neo4j when no URI is configured; otherwise just points at the given server."""

    def __init__(self, options: GraphServerOptions) -> None:
        self.options = options
        self.embedded: EmbeddedNeo4j | None = None
        self._target: Neo4jTarget | None = None

    @property
    def target(self) -> Neo4jTarget:
        if self._target is None:
            raise Neo4jUnavailableError("the graph server has not been started")
        return self._target

    def start(self) -> Neo4jTarget:
        """Start (embedded) or reach (external) the server; block until it answers."""
        opts = self.options
        if opts.uri:
            if opts.password is None:
                raise Neo4jUnavailableError(
                    f"NEO4J_URI is set to {opts.uri} but no password is configured (NEO4J_PASSWORD)"
                )
            self._target = Neo4jTarget(opts.uri, opts.user, opts.password, opts.database)
            wait_until_answering(
                self._target, opts.connect_timeout_s, acquisition_timeout_s=opts.acquisition_timeout_s
            )
            return self._target
        config = EmbeddedConfig(
            home=opts.data_dir / "neo4j",
            port=opts.embedded_port,
            heap_mb=opts.embedded_heap_mb,
            pagecache_mb=opts.embedded_pagecache_mb,
            cache_dir=opts.cache_dir or default_cache_dir(),
        )
        self.embedded = EmbeddedNeo4j(config)
        self.embedded.start()
        user, password = self.embedded.auth
        # Community edition serves exactly one user database, named neo4j.
        self._target = Neo4jTarget(self.embedded.uri, user, password, "neo4j")
        return self._target

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None

    def __enter__(self) -> GraphServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def open_driver(target: Neo4jTarget, *, acquisition_timeout_s: float = ACQUISITION_TIMEOUT_S) -> Driver:
    """A driver for the target (the caller closes it).

    A server that is gone is noticed in seconds rather than the driver's minutes: connecting gives up
    after `CONNECT_TIMEOUT_S`, getting a connection (a pooled one, or a new one whose server accepts the
    socket but never answers the Bolt handshake) after `acquisition_timeout_s` (`ACQUISITION_TIMEOUT_S`
    unless the service sets `REGRAPH_GRAPH_ACQUISITION_TIMEOUT_S`; must be above 0), a pooled
    connection idle for `LIVENESS_CHECK_AFTER_S` is checked (a RESET round trip) before it is used
    again, so a connection the server dropped fails there and is replaced instead of failing the
    query, and retried transactions stop retrying after `RETRY_TIME_S`. TCP keep-alive is on. (Reader
    Cypher runs in explicit transactions, without the driver's retries, under a server-side timeout; the
    store's transactions and readiness are retried by `graphdb.retry`, which answers a refused
    connection at once.)
    """
    return GraphDatabase.driver(
        target.uri,
        auth=(target.user, target.password),
        connection_timeout=CONNECT_TIMEOUT_S,
        connection_acquisition_timeout=acquisition_timeout_s,
        liveness_check_timeout=LIVENESS_CHECK_AFTER_S,
        max_transaction_retry_time=RETRY_TIME_S,
        keep_alive=True,
    )


@dataclass
class OpenGraph:
    """A started (or reached) graph server, a driver over its database and the store over that driver."""

    server: GraphServer
    driver: Driver
    store: Neo4jGraphStore
    migrations_applied: list[str] = field(default_factory=list)  # file names, in the order applied

    @property
    def target(self) -> Neo4jTarget:
        """Where the database is and how to log in."""
        return self.server.target

    def close(self) -> None:
        """Close the driver and stop the server if it was started here (an external one keeps running)."""
        try:
            self.driver.close()
        finally:
            self.server.stop()

    def __enter__(self) -> OpenGraph:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_graph(
    options: GraphServerOptions,
    *,
    migrate: bool = True,
    candidate_cache: CandidateCache | None = None,
    progress: Callable[[str], None] | None = None,
) -> OpenGraph:
    """Start the embedded Neo4j or reach the configured one, open a driver and (unless told not to)
    apply the pending migrations; the caller closes what it gets (or uses it as a context manager).

    `progress`, when given, hears each phase as it begins ("starting the embedded Neo4j", "migrating
    the schema"...); an exception it raises stops the opening like any other.

    Raises `Neo4jUnavailableError`, `LauncherError` or `MigrationError` (all `GraphDBError`), having
    stopped whatever it had started.
    """
    report = progress or (lambda _phase: None)
    server = GraphServer(options)
    report(f"reaching Neo4j at {options.uri}" if options.uri else "starting the embedded Neo4j")
    target = server.start()
    try:
        report("opening a connection to Neo4j")
        driver = open_driver(target, acquisition_timeout_s=options.acquisition_timeout_s)
        try:
            if migrate:
                report("migrating the schema")
            applied = MigrationRunner(driver, target.database).migrate() if migrate else []
        except BaseException:
            driver.close()
            raise
    except BaseException:
        server.stop()
        raise
    store = Neo4jGraphStore(driver, target.database, candidate_cache=candidate_cache)
    return OpenGraph(server, driver, store, [m.path.name for m in applied])


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
        with open_graph(options, candidate_cache=candidate_cache) as graph:
            yield graph.store


def wait_until_answering(
    target: Neo4jTarget, timeout_s: float, *, acquisition_timeout_s: float = ACQUISITION_TIMEOUT_S
) -> None:
    """Block until the server accepts our credentials, retrying while it is unreachable (each try's
    driver waits `acquisition_timeout_s` at most for its connection)."""
    retrying = Retrying(
        stop=stop_after_delay(timeout_s),
        wait=wait_fixed(1.0),
        retry=retry_if_exception_type((ServiceUnavailable, OSError)),
    )
    try:
        for attempt in retrying:
            with attempt, open_driver(target, acquisition_timeout_s=acquisition_timeout_s) as driver:
                driver.verify_connectivity()
    except RetryError as e:
        raise Neo4jUnavailableError(f"Neo4j at {target.uri} did not answer within {timeout_s:.0f} s") from e
    except AuthError as e:
        raise Neo4jUnavailableError(f"Neo4j at {target.uri} refused the credentials: {e}") from e


def readiness(driver: Driver, database: str) -> dict[str, Any]:
    """What /readyz reports: the server answers, its version, and the schema's migration level."""

    def components() -> list[Any]:
        with driver.session(database=database, max_transaction_retry_time=NO_DRIVER_RETRIES) as session:
            return session.execute_read(lambda tx: list(tx.run(queries.SERVER_COMPONENTS)))

    try:
        # A refused connection is answered at once (nothing listens there), not retried for seconds.
        records = retried(components)
        runner = MigrationRunner(driver, database)
        current, latest = runner.current_version(), runner.latest_version()
    except (Neo4jError, ServiceUnavailable, OSError) as e:
        if connection_refused(e):
            raise Neo4jUnavailableError(f"Neo4j refused the connection (it is not running): {e}") from e
        raise Neo4jUnavailableError(f"Neo4j is not answering: {e}") from e
    component = records[0] if records else {}
    return {
        "neo4j": "ready",
        "server_version": (component.get("versions") or ["unknown"])[0],
        "edition": component.get("edition", "unknown"),
        "schema_version": current,
        "latest_schema_version": latest,
        "schema_up_to_date": current == latest,
    }
