"""Read-only Cypher for users: checked before it runs, then run in a READ transaction with limits.

Two layers: a lexical check refuses anything that writes, administers, loads files, batches its own
transactions or switches database (with an error naming the refused clause), and the query then runs
in a read-access transaction with a server-side timeout, so the server refuses a write the check
missed. Results are capped at a row limit; graph values are returned as plain JSON-able dicts.
"""

from __future__ import annotations

import re
from typing import Any

from neo4j import READ_ACCESS, Driver, ManagedTransaction, unit_of_work
from neo4j.exceptions import ClientError, Neo4jError, ServiceUnavailable
from neo4j.graph import Node, Path, Relationship
from neo4j.time import Date, DateTime, Duration, Time
from pydantic import BaseModel, Field

from graphdb.errors import CypherQueryError, CypherRefusedError, CypherTimeoutError

MAX_QUERY_CHARS = 10_000
# Procedures a reader may call; everything else under CALL (dbms.*, db.*, apoc.*, ...) is refused.
READ_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshiptypes",
        "db.propertykeys",
        "db.schema.visualization",
        "db.schema.nodetypeproperties",
        "db.schema.reltypeproperties",
        "db.index.vector.querynodes",
        "db.index.fulltext.querynodes",
        "db.index.fulltext.queryrelationships",
    }
)
# Clause keywords that write, administer or escape the read-only sandbox, with the reason shown.
_REFUSED = (
    (r"CREATE", "CREATE writes to the graph (or changes the schema)"),
    (r"MERGE", "MERGE writes to the graph"),
    (r"SET", "SET writes properties or labels"),
    (r"DELETE", "DELETE removes data"),
    (r"DETACH", "DETACH DELETE removes data"),
    (r"REMOVE", "REMOVE deletes properties or labels"),
    (r"DROP", "DROP changes the schema"),
    (r"ALTER", "ALTER is an administration command"),
    (r"FOREACH", "FOREACH exists only to write"),
    (r"LOAD\s+CSV", "LOAD CSV reads files or URLs from the server"),
    (
        r"IN\s+(?:\d+\s+)?(?:CONCURRENT\s+)?TRANSACTIONS",
        "CALL { } IN TRANSACTIONS commits batches of its own",
    ),
    (r"PERIODIC\s+COMMIT", "PERIODIC COMMIT commits batches of its own"),
    (r"USE", "USE switches to another database"),
    (r"SHOW", "SHOW commands are administration commands"),
    (r"GRANT|REVOKE|DENY", "privilege commands are administration commands"),
    (r"(?:START|STOP)\s+DATABASE", "database commands are administration commands"),
    (r"TERMINATE", "TERMINATE is an administration command"),
    (r"ENABLE|DEALLOCATE|REALLOCATE", "server commands are administration commands"),
)
_REFUSED_RE = [(re.compile(rf"(?<![.$\w]){pattern}\b", re.IGNORECASE), why) for pattern, why in _REFUSED]
_CALL_RE = re.compile(r"(?<![.$\w])CALL\s+([A-Za-z_][\w.]*)", re.IGNORECASE)
_STRING_RE = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.DOTALL)
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_BACKTICK_RE = re.compile(r"`(?:[^`]|``)*`")


class CypherResult(BaseModel):
    """Rows of a read query, at most the row limit; `truncated` says more were available."""

    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool = False
    row_limit: int = Field(ge=1)


def _mask(query: str) -> str:
    """The query with comments removed and literals/quoted names blanked, so keywords inside them don't count."""
    masked = _COMMENT_RE.sub(" ", query)
    masked = _STRING_RE.sub("''", masked)
    return _BACKTICK_RE.sub("`x`", masked)


def check_read_only(query: str) -> None:
    """Raise `CypherRefusedError` unless `query` is a plain read (allowlisted procedures only)."""
    if not query.strip():
        raise CypherRefusedError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise CypherRefusedError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    masked = _mask(query)
    for pattern, why in _REFUSED_RE:
        match = pattern.search(masked)
        if match:
            raise CypherRefusedError(
                f"refused: {why} (found {match.group(0).upper()!r}); only reads are allowed"
            )
    for match in _CALL_RE.finditer(masked):
        procedure = match.group(1).lower()
        if procedure not in READ_PROCEDURES:
            allowed = ", ".join(sorted(READ_PROCEDURES))
            raise CypherRefusedError(
                f"refused: procedure {match.group(1)!r} is not allowed; allowed: {allowed}"
            )


def to_json(value: Any) -> Any:
    """Graph values as JSON-able data (nodes and relationships as dicts with their labels/type)."""
    if isinstance(value, Node):
        return {
            "_id": value.element_id,
            "_labels": sorted(value.labels),
            **{k: to_json(v) for k, v in value.items()},
        }
    if isinstance(value, Relationship):
        return {
            "_id": value.element_id,
            "_type": value.type,
            "_start": value.start_node.element_id if value.start_node else None,
            "_end": value.end_node.element_id if value.end_node else None,
            **{k: to_json(v) for k, v in value.items()},
        }
    if isinstance(value, Path):
        return {
            "nodes": [to_json(n) for n in value.nodes],
            "relationships": [to_json(r) for r in value.relationships],
        }
    if isinstance(value, (DateTime, Date, Time, Duration)):
        return value.iso_format()
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def run_read_only(
    driver: Driver,
    query: str,
    parameters: dict[str, Any] | None = None,
    *,
    database: str = "neo4j",
    row_limit: int = 1000,
    timeout_s: float = 10.0,
) -> CypherResult:
    """Check `query`, then run it read-only with `parameters`, a timeout and at most `row_limit` rows."""
    check_read_only(query)

    @unit_of_work(timeout=timeout_s)
    def work(tx: ManagedTransaction) -> CypherResult:
        result = tx.run(query, parameters or {})
        rows: list[dict[str, Any]] = []
        truncated = False
        for record in result:
            if len(rows) >= row_limit:
                truncated = True
                break
            rows.append({k: to_json(record[k]) for k in record.keys()})  # noqa: SIM118 - Record is not a dict
        columns = list(result.keys())
        result.consume()
        return CypherResult(columns=columns, rows=rows, truncated=truncated, row_limit=row_limit)

    try:
        with driver.session(database=database, default_access_mode=READ_ACCESS) as session:
            return session.execute_read(work)
    except ClientError as e:
        code = e.code or ""
        if "TransactionTimedOut" in code or "Terminated" in code:
            raise CypherTimeoutError(f"the query ran past {timeout_s:g} s and was stopped") from e
        if "Forbidden" in code or "AccessMode" in code:
            raise CypherRefusedError(f"refused by the server: {e.message}") from e
        raise CypherQueryError(f"the query failed: {e.message}") from e
    except (Neo4jError, ServiceUnavailable, OSError) as e:
        raise CypherQueryError(f"the query failed: {e}") from e
