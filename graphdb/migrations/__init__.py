"""Numbered, append-only Cypher migrations and the runner that applies them.

Files are named `V###__snake_case_name.cypher` and hold one or more statements separated by `;` at
the end of a line. Each applied migration is recorded in the graph as a `SchemaMigration` node with
its checksum; an applied file that changes afterwards is refused, since the database already holds
what the old text did.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from neo4j import Driver
from neo4j.exceptions import Neo4jError

from graphdb import queries
from graphdb.errors import MigrationChecksumError, MigrationError

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent
_FILE_NAME = re.compile(r"^V(\d{3,})__([a-z0-9_]+)\.cypher$")


@dataclass(frozen=True)
class Migration:
    """One migration file."""

    version: int
    name: str
    path: Path
    checksum: str
    statements: tuple[str, ...]


@dataclass(frozen=True)
class MigrationStatus:
    """A migration's state in one database."""

    version: int
    name: str
    state: Literal["applied", "pending"]
    checksum: str
    applied_at: str | None


def split_statements(text: str) -> tuple[str, ...]:
    """Split a migration into statements: `//` comment lines dropped, `;` at a line's end separates."""
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    body = "\n".join(kept)
    parts = re.split(r";\s*(?:\n|$)", body)
    return tuple(part.strip() for part in parts if part.strip())


def checksum_of(text: str) -> str:
    """A checksum that ignores line-ending style, so a checkout on another OS is not an edit."""
    normalized = text.replace("\r\n", "\n").strip() + "\n"
    return hashlib.sha256(normalized.encode()).hexdigest()


def discover(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migration files in version order; refuses malformed names and duplicate versions."""
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.cypher")):
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: migration files must be named V###__snake_case.cypher")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{path.name}: version {version} is used twice")
        text = path.read_text()
        statements = split_statements(text)
        if not statements:
            raise MigrationError(f"{path.name}: no statements")
        found[version] = Migration(version, match.group(2), path, checksum_of(text), statements)
    return [found[v] for v in sorted(found)]


class MigrationRunner:
    """Applies pending migrations in order and records each; validates what was applied before."""

    def __init__(self, driver: Driver, database: str = "neo4j", directory: Path = MIGRATIONS_DIR) -> None:
        self._driver = driver
        self._database = database
        self._directory = directory

    def _applied(self) -> dict[int, dict[str, Any]]:
        records, _, _ = self._driver.execute_query(queries.APPLIED_MIGRATIONS, database_=self._database)
        return {int(r["version"]): dict(r) for r in records}

    def _validate(self, migrations: list[Migration], applied: dict[int, dict[str, Any]]) -> None:
        by_version = {m.version: m for m in migrations}
        for version, row in applied.items():
            migration = by_version.get(version)
            if migration is None:
                raise MigrationError(
                    f"migration V{version:03d} ({row['name']}) is recorded in the database but its file "
                    "is missing; migrations are append-only — restore the file"
                )
            if migration.checksum != row["checksum"]:
                raise MigrationChecksumError(
                    f"{migration.path.name} was edited after it was applied (checksum "
                    f"{row['checksum'][:12]}… in the database, {migration.checksum[:12]}… on disk); "
                    "migrations are append-only — revert the edit and add a new V###__ file instead"
                )
        pending_before_applied = [m.version for m in migrations if m.version not in applied]
        if applied and pending_before_applied and min(pending_before_applied) < max(applied):
            raise MigrationError(
                f"migration V{min(pending_before_applied):03d} is older than the newest applied one "
                f"(V{max(applied):03d}); number new migrations after the last applied"
            )

    def status(self) -> list[MigrationStatus]:
        """Every migration on disk with its state in this database (validating checksums)."""
        migrations = discover(self._directory)
        applied = self._applied_with_bookkeeping()
        self._validate(migrations, applied)
        return [
            MigrationStatus(
                m.version,
                m.name,
                "applied" if m.version in applied else "pending",
                m.checksum,
                str(applied[m.version]["applied_at"]) if m.version in applied else None,
            )
            for m in migrations
        ]

    def current_version(self) -> int:
        """The newest applied migration's version, 0 for an empty database."""
        applied = self._applied_with_bookkeeping()
        return max(applied) if applied else 0

    def latest_version(self) -> int:
        """The newest migration on disk."""
        migrations = discover(self._directory)
        return migrations[-1].version if migrations else 0

    def _applied_with_bookkeeping(self) -> dict[int, dict[str, Any]]:
        """The applied migrations; on a database with none, first the bookkeeping constraint.

        A database with recorded migrations has the constraint (it is made before the first record):
        a restart skips the schema statement, the slowest of the check on a cold server (issue 31).
        """
        applied = self._applied()
        if not applied:
            self._ensure_bookkeeping()
        return applied

    def _ensure_bookkeeping(self) -> None:
        try:
            self._driver.execute_query(queries.MIGRATION_CONSTRAINT, database_=self._database)
        except Neo4jError as e:
            raise MigrationError(f"could not create the migration bookkeeping constraint: {e}") from e

    def migrate(self, index_timeout_s: int = 300) -> list[Migration]:
        """Apply every pending migration in order; return those applied (empty when up to date)."""
        migrations = discover(self._directory)
        applied = self._applied_with_bookkeeping()
        self._validate(migrations, applied)
        done: list[Migration] = []
        for migration in migrations:
            if migration.version in applied:
                continue
            logger.info("applying migration", extra={"migration": migration.path.name})
            for statement in migration.statements:
                try:
                    # Schema statements cannot share a transaction with writes: one auto-commit each.
                    self._driver.execute_query(statement, database_=self._database)
                except Neo4jError as e:
                    raise MigrationError(f"{migration.path.name}: statement failed: {e}\n{statement}") from e
            self._driver.execute_query(
                queries.RECORD_MIGRATION,
                version=migration.version,
                name=migration.name,
                checksum=migration.checksum,
                statements=len(migration.statements),
                database_=self._database,
            )
            done.append(migration)
        if done:
            with self._driver.session(database=self._database) as session:
                session.run(queries.AWAIT_INDEXES, timeout_s=index_timeout_s).consume()
        return done
