"""Every exception of the graph database package: one root, one subclass per failure a caller can act on.

The server and migrations, the reasoning-graph store (and its export files), the job store and the
read-only Cypher guard each have a branch under `GraphDBError`.
"""


class GraphDBError(Exception):
    """Root of every error raised by the graphdb package."""


class LauncherError(GraphDBError):
    """The embedded Neo4j server could not be built, started or stopped."""


class JavaNotFoundError(LauncherError):
    """No suitable Java runtime (17 or newer) is on PATH."""


class MavenNotFoundError(LauncherError):
    """Maven is not on PATH, so the Neo4j jars cannot be resolved."""


class PortInUseError(LauncherError):
    """The Bolt port asked for is already taken by another process."""


class Neo4jUnavailableError(GraphDBError):
    """The Neo4j server did not answer over Bolt."""


class MigrationError(GraphDBError):
    """A schema migration could not be applied."""


class MigrationChecksumError(MigrationError):
    """An already-applied migration file was edited; migrations are append-only."""


class GraphStoreError(GraphDBError):
    """Root of the reasoning-graph store's errors."""


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


class AuditEntryNotFoundError(GraphStoreError):
    """No audit entry has this id."""


class ApiKeyNotFoundError(GraphStoreError):
    """No API key has this hash or id."""


class InvalidOperationError(GraphStoreError):
    """The operation is well-formed but not possible in the graph's current state."""


class ImportConflictError(GraphStoreError):
    """An import was asked into a graph that is not empty."""


class StoreUnavailableError(GraphStoreError):
    """The database did not answer or failed the query."""


class StoreTimeoutError(StoreUnavailableError):
    """A transaction ran past the store's time limit and the server stopped it."""


class ExportFormatError(GraphStoreError):
    """A file is not a `regraph.graph/v1` export."""


class JobStoreError(GraphDBError):
    """Root of the job store's errors."""


class JobNotFoundError(JobStoreError):
    """No job has this id."""


class JobStateError(JobStoreError):
    """The job is not in a state that allows this change (e.g. finishing a finished job)."""


class CypherGuardError(GraphDBError):
    """Root of the read-only Cypher guard's errors."""


class CypherRefusedError(CypherGuardError):
    """The query is not allowed for readers (it writes, administers, loads files...)."""


class CypherQueryError(CypherGuardError):
    """The query is allowed but failed: a syntax error, a timeout, a type error."""


class CypherTimeoutError(CypherQueryError):
    """The query ran past its time limit and was stopped by the server."""


class CypherAnswerTooLargeError(CypherQueryError):
    """The query's answer is larger than the response limit: it was refused while it arrived."""


class CypherUnavailableError(CypherQueryError):
    """The database did not answer the query (gone, paused, unreachable) or its call was abandoned:
    the server's trouble, not the query's (HTTP 503, not a query timeout)."""


class SchemaReadError(GraphDBError):
    """The graph's schema could not be read (the server failed or the read ran past its time limit)."""
