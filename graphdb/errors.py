"""The graph database package's exceptions: one root, one subclass per failure a caller can act on."""


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
