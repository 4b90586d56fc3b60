"""Read-only Cypher for users: the one path by which a reader's query reaches Neo4j.

`run_read_only` is that path (``POST /v1/cypher`` and the MCP server both call it, through
`api.cypher.run.run_cypher`). A query passes four layers before any row comes back, each enough on
its own for what it guards (docs/security.md):

1. **Lexical check** (`check_read_only`): the query is tokenized the way Neo4j reads it (strings,
   comments, backtick-quoted names; unicode escapes, which Neo4j decodes before it tokenizes, are
   refused), then refused when a clause keyword writes, administers, loads files or URLs, commits
   batches of its own or switches database, when a called procedure's parsed name is not on
   `READ_PROCEDURES`, or when it is too long, has too many tokens or nests too deeply (Neo4j's
   parser recurses on nesting and a few hundred levels stop its worker for minutes).
2. **Neo4j's verdict** (`check_plan`): the query is EXPLAINed (planned, never run) and refused unless
   Neo4j calls it read-only (query type ``r``), its plan has no ``LoadCSV``, every ``ProcedureCall``
   is on the allow-list, and every operator that finds nodes starts from labels in `READABLE_LABELS`
   (no all-node scans or id seeks), so internal nodes (API keys, jobs and their submitted sources,
   migrations) stay out of reach. Only ``TRANSITION`` relationships exist, between techniques.
3. **A read transaction** with a server-side timeout (it covers planning too), on a server configured
   so that a query that slipped through can do no harm (graphdb/embedded.py: no file URLs for
   LOAD CSV, every address blocked for URL loads, plugin procedures off).
4. **Limits on what comes back**: at most `CypherLimits.row_limit` rows and `max_response_bytes`
   bytes of JSON, values nested at most `MAX_VALUE_DEPTH` deep; parameters are bounded likewise. The
   limit holds while the answer arrives, not only once it is decoded: the bytes Neo4j sends are
   counted as the driver receives them (`_AnswerBudget`) and a row is converted only while its JSON
   can still fit, so one huge row (``RETURN range(1, 5000000)``) is refused before the API's memory
   grows with it.

Neo4j Community has no roles (every user may administer), so the connection itself cannot be made
read-only there: layers 1, 2 and 4 are what keep a reader a reader.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import threading
from dataclasses import dataclass
from typing import Any, Literal

from neo4j import READ_ACCESS, Driver
from neo4j.exceptions import ClientError, DriverError, Neo4jError, ServiceUnavailable, SessionExpired
from neo4j.graph import Node, Path, Relationship
from neo4j.time import Date, DateTime, Duration, Time
from pydantic import BaseModel, Field

from graphdb.errors import (
    CypherAnswerTooLargeError,
    CypherGuardError,
    CypherQueryError,
    CypherRefusedError,
    CypherTimeoutError,
    CypherUnavailableError,
)

logger = logging.getLogger(__name__)

MAX_QUERY_CHARS = 10_000
MAX_QUERY_TOKENS = 2_000
# Brackets, CASE and chains of prefix operators each cost Neo4j's parser a level of recursion.
MAX_QUERY_NESTING = 40
MAX_PARAMETER_BYTES = 1_000_000
MAX_VALUE_DEPTH = 32
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
DEFAULT_MAX_RESPONSE_BYTES = 5_000_000
# The answer as Neo4j sends it (PackStream) may take this many times the response limit before the
# connection is cut: a value encodes to at most about twice its shortest JSON (a float: 9 bytes against
# "0.0, "), so an answer within the limit always fits, with the rows the driver fetches ahead.
ANSWER_BYTES_PER_RESPONSE_BYTE = 2
FETCH_SIZE = 100  # rows the driver asks Neo4j for at a time

# Procedures a reader may call; everything else under CALL (dbms.*, db.*, apoc.*, ...) is refused. The
# schema procedures (db.labels, db.propertyKeys, db.schema.*...) are not among them: they list every
# label and property key, internal ones included (ApiKey, Job...); the schema a reader may see is
# `graphdb.schema.read_schema` (MCP resource regraph://schema), which keeps to `READABLE_LABELS`.
READ_PROCEDURES = frozenset(
    {
        "db.index.vector.querynodes",
        "db.index.fulltext.querynodes",
        "db.index.fulltext.queryrelationships",
    }
)
SCHEMA_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshiptypes",
        "db.propertykeys",
        "db.schema.visualization",
        "db.schema.nodetypeproperties",
        "db.schema.reltypeproperties",
    }
)
# Node labels a reader may reach. ApiKey, Job, JobEvent and SchemaMigration are internal; AuditEntry
# is readable because GET /v1/audit shows the same entries to readers.
READABLE_LABELS = frozenset({"Technique", "Example", "Task", "Trajectory", "RelabelDecision", "AuditEntry"})

# Clause keywords that write, administer or escape the read-only sandbox, with the reason shown.
_REFUSED_WORDS: dict[str, str] = {
    "CREATE": "CREATE writes to the graph (or changes the schema)",
    "MERGE": "MERGE writes to the graph",
    "SET": "SET writes properties or labels",
    "DELETE": "DELETE removes data",
    "DETACH": "DETACH DELETE removes data",
    "REMOVE": "REMOVE deletes properties or labels",
    "DROP": "DROP changes the schema",
    "ALTER": "ALTER is an administration command",
    "RENAME": "RENAME is an administration command",
    "FOREACH": "FOREACH exists only to write",
    "LOAD": "LOAD CSV reads files or URLs from the server",
    "TRANSACTIONS": "CALL { } IN TRANSACTIONS commits batches of its own",
    "PERIODIC": "PERIODIC COMMIT commits batches of its own",
    "USE": "USE switches to another database",
    "SHOW": "SHOW commands are administration commands",
    "GRANT": "privilege commands are administration commands",
    "REVOKE": "privilege commands are administration commands",
    "DENY": "privilege commands are administration commands",
    "START": "database commands are administration commands",
    "STOP": "database commands are administration commands",
    "TERMINATE": "TERMINATE is an administration command",
    "ENABLE": "server commands are administration commands",
    "DEALLOCATE": "server commands are administration commands",
    "REALLOCATE": "server commands are administration commands",
}
# Query prefixes that change how the server treats the query; the service EXPLAINs it itself.
_REFUSED_PREFIXES = {"EXPLAIN", "PROFILE", "CYPHER"}
_OPENING = {"(": ")", "[": "]", "{": "}"}
_PREFIX_OPERATORS = {"NOT", "-", "+"}

TokenKind = Literal["word", "name", "string", "number", "parameter", "symbol"]


@dataclass(frozen=True)
class Token:
    """One lexical token: a bare word, a `quoted` name (unquoted here), a literal or a symbol."""

    kind: TokenKind
    text: str
    offset: int


class CypherResult(BaseModel):
    """Rows of a read query, within the limits; `truncated` says more were available."""

    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool = False
    row_limit: int = Field(ge=1)


@dataclass(frozen=True)
class CypherLimits:
    """The most one reader's query may take: rows, seconds (server-side) and response bytes."""

    row_limit: int = 1000
    timeout_s: float = 10.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


# -- layer 1: the lexical check ----------------------------------------------------------------------


def _refuse(reason: str) -> CypherRefusedError:
    return CypherRefusedError(f"refused: {reason}")


def _end_of_quoted(query: str, start: int, quote: str) -> int:
    """Index just past the literal or name opened by `quote` at `start`."""
    i = start + 1
    while i < len(query):
        c = query[i]
        if quote != "`" and c == "\\":
            i += 2
            continue
        if c == quote:
            if quote == "`" and query.startswith("``", i):
                i += 2  # a doubled backtick is one backtick inside the name
                continue
            return i + 1
        i += 1
    what = "name" if quote == "`" else "string"
    raise _refuse(f"a quoted {what} opened at offset {start} is never closed")


# Characters that end a line in some reader of the text: Neo4j's lexer ends a `//` comment at CR as well
# as LF, and other tools at the Unicode line and paragraph separators. A comment is accepted only when
# it ends at LF (or CR LF), where every reader agrees; anything else could hide text from this check.
_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x85\u2028\u2029]")


def _end_of_line_comment(query: str, start: int) -> int:
    """Index just past the `//` comment at `start` (its line break included); refuses a comment that
    ends at anything but a newline (LF or CR LF), where Neo4j and this lexer could disagree."""
    match = _LINE_BREAKS.search(query, start)
    if match is None:
        return len(query)
    end = match.start()
    if query[end] == "\n" or query.startswith("\r\n", end):
        return end + (1 if query[end] == "\n" else 2)
    raise _refuse(
        f"the comment at offset {start} ends at {query[end]!r}: end // comments with a newline (\\n)"
    )


def tokenize(query: str) -> list[Token]:
    """The query's tokens, without whitespace and comments, as Neo4j's lexer would split them.

    Raises `CypherRefusedError` for what this lexer would read differently from Neo4j's: unicode
    escapes (Neo4j decodes ``\\uXXXX`` anywhere before it tokenizes, so one could close a string)
    and unterminated strings, names or comments.
    """
    if re.search(r"\\[uU]", query):
        raise _refuse(
            "unicode escapes (\\u...) are not accepted: write the character itself or pass it as a $parameter"
        )
    tokens: list[Token] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
        elif query.startswith("//", i):
            i = _end_of_line_comment(query, i)
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            if end < 0:
                raise _refuse(f"a comment opened at offset {i} is never closed")
            i = end + 2
        elif c in "'\"`":
            end = _end_of_quoted(query, i, c)
            if c == "`":
                tokens.append(Token("name", query[i + 1 : end - 1].replace("``", "`"), i))
            else:
                tokens.append(Token("string", query[i:end], i))
            i = end
        elif c == "$":
            match = re.match(r"\$(?:`(?:[^`]|``)*`|\w*)", query[i:])
            length = len(match.group(0)) if match else 1
            tokens.append(Token("parameter", query[i : i + length], i))
            i += length
        elif c.isdigit():
            match = re.match(r"\d[\w.]*", query[i:])
            length = len(match.group(0)) if match else 1
            tokens.append(Token("number", query[i : i + length], i))
            i += length
        elif c.isalpha() or c == "_":
            match = re.match(r"\w+", query[i:])
            length = len(match.group(0)) if match else 1
            tokens.append(Token("word", query[i : i + length], i))
            i += length
        else:
            tokens.append(Token("symbol", c, i))
            i += 1
    return tokens


def _nesting(tokens: list[Token]) -> int:
    """The deepest nesting: open brackets and CASEs, plus the current run of prefix operators."""
    deepest = depth = run = 0
    for t in tokens:
        word = t.text.upper() if t.kind == "word" else None
        if (t.kind == "symbol" and t.text in _OPENING) or word == "CASE":
            depth += 1
        elif (t.kind == "symbol" and t.text in _OPENING.values()) or word == "END":
            depth = max(depth - 1, 0)
        operator = word if word is not None else t.text if t.kind == "symbol" else None
        if operator in _PREFIX_OPERATORS:
            run += 1
        else:
            run = 0
        deepest = max(deepest, depth + run)
    return deepest


def _is_clause_word(tokens: list[Token], i: int) -> bool:
    """Whether the bare word at `i` can be a keyword (not a property, label, map key or variable)."""
    before = tokens[i - 1] if i > 0 else None
    after = tokens[i + 1] if i + 1 < len(tokens) else None
    if before is not None and before.kind == "symbol" and before.text in ".:":
        return False
    return not (after is not None and after.kind == "symbol" and after.text == ":")


def _procedure_name(tokens: list[Token], start: int) -> tuple[str, str] | None:
    """The dotted name after CALL at `start` (as written, and lowercased), or None for a subquery."""
    parts: list[str] = []
    i = start
    while i < len(tokens) and tokens[i].kind in ("word", "name"):
        parts.append(tokens[i].text)
        if i + 1 < len(tokens) and tokens[i + 1].kind == "symbol" and tokens[i + 1].text == ".":
            i += 2
            continue
        break
    if not parts:
        return None
    written = ".".join(parts)
    return written, written.lower()


_SCHEMA_REFUSAL = (
    "procedure {name!r} lists internal labels and properties too; the graph's schema for readers is "
    "the MCP resource regraph://schema (readable labels: " + ", ".join(sorted(READABLE_LABELS)) + ")"
)


def check_read_only(query: str) -> None:
    """Raise `CypherRefusedError` unless `query` is a plain read (allowlisted procedures only).

    This is layer 1 (lexical); `check_plan` asks Neo4j for its own verdict.
    """
    if not query.strip():
        raise CypherRefusedError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise CypherRefusedError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    tokens = tokenize(query)
    if len(tokens) > MAX_QUERY_TOKENS:
        raise _refuse(f"the query has more than {MAX_QUERY_TOKENS} tokens")
    if (deepest := _nesting(tokens)) > MAX_QUERY_NESTING:
        raise _refuse(
            f"the query nests {deepest} levels deep (brackets, CASE, NOT/-); at most {MAX_QUERY_NESTING}"
        )
    if tokens and tokens[0].kind == "word" and tokens[0].text.upper() in _REFUSED_PREFIXES:
        raise _refuse(f"{tokens[0].text.upper()} prefixes are not accepted; send the query alone")
    for i, token in enumerate(tokens):
        if token.kind != "word" or not _is_clause_word(tokens, i):
            continue
        word = token.text.upper()
        if word in _REFUSED_WORDS:
            found = "LOAD CSV" if word == "LOAD" else "IN TRANSACTIONS" if word == "TRANSACTIONS" else word
            raise _refuse(f"{_REFUSED_WORDS[word]} (found {found!r}); only reads are allowed")
        if word == "CALL":
            name = _procedure_name(tokens, i + 1)
            if name is not None and name[1] in SCHEMA_PROCEDURES:
                raise _refuse(_SCHEMA_REFUSAL.format(name=name[0]))
            if name is not None and name[1] not in READ_PROCEDURES:
                raise _refuse(
                    f"procedure {name[0]!r} is not allowed; allowed: {', '.join(sorted(READ_PROCEDURES))}"
                )


# -- layer 2: Neo4j's verdict on the plan ------------------------------------------------------------

_PROCEDURE_RE = re.compile(r"^\s*([^\s(]+)\s*\(")
_LABEL_RE = re.compile(r"(?<!:):(?!:)\s*(`(?:[^`]|``)+`|\w+)((?:\s*[|&]\s*(?:`(?:[^`]|``)+`|\w+))*)")


def _labels_in(details: str) -> set[str]:
    labels: set[str] = set()
    for match in _LABEL_RE.finditer(details):
        for part in re.split(r"\s*[|&]\s*", match.group(1) + match.group(2)):
            name = part.strip()
            if name.startswith("`") and name.endswith("`"):
                name = name[1:-1].replace("``", "`")
            if name:
                labels.add(name)
    return labels


def _plan_operators(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (operator, details) of a plan tree, the operator's name without its ``@runtime`` tag."""
    out: list[tuple[str, str]] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        operator = str(node.get("operatorType", "")).split("@")[0]
        arguments = node.get("args") or node.get("arguments") or {}
        out.append((operator, str(arguments.get("Details") or "")))
        stack.extend(node.get("children") or [])
    return out


def _check_operator(operator: str, details: str) -> None:
    if operator == "LoadCSV":
        raise _refuse("LOAD CSV reads files or URLs from the server (found in the plan)")
    if operator == "ProcedureCall":
        match = _PROCEDURE_RE.match(details)
        name = match.group(1) if match else details
        if name.lower() not in READ_PROCEDURES:
            raise _refuse(f"procedure {name!r} is not allowed (found in the plan)")
        return
    if "AllNodes" in operator:
        raise _refuse(
            "a query must find its nodes by label (e.g. MATCH (t:Technique)); "
            f"readable labels: {', '.join(sorted(READABLE_LABELS))}"
        )
    if operator.startswith("Node") and ("ById" in operator or "ByElementId" in operator):
        raise _refuse("nodes cannot be looked up by id; match them by label and property")
    if "Node" in operator and ("Scan" in operator or "Seek" in operator or "Count" in operator):
        labels = _labels_in(details)
        hidden = labels - READABLE_LABELS
        if hidden:
            raise _refuse(
                f"label(s) {', '.join(sorted(hidden))} are not readable; "
                f"readable labels: {', '.join(sorted(READABLE_LABELS))}"
            )
        if not labels and "Count" not in operator:
            raise _refuse(f"the plan finds nodes without a label ({operator})")


def check_plan(query_type: str | None, plan: dict[str, Any] | None) -> None:
    """Raise `CypherRefusedError` unless Neo4j's EXPLAIN of a query shows a read of readable nodes.

    This is layer 2: `query_type` must be ``r`` (read-only), and `plan` (the EXPLAIN plan tree) must
    have no LOAD CSV, no procedure outside `READ_PROCEDURES`, and find nodes only by readable labels.
    """
    if query_type != "r":
        kinds = {"rw": "reads and writes", "w": "writes", "s": "changes the schema or administers"}
        raise _refuse(
            f"Neo4j says this query {kinds.get(str(query_type), 'is not a read')}; only reads are allowed"
        )
    if plan is None:
        raise _refuse("Neo4j gave no plan for this query")
    for operator, details in _plan_operators(plan):
        _check_operator(operator, details)


# -- layer 4: parameters in, values out ---------------------------------------------------------------


def check_parameters(parameters: dict[str, Any]) -> None:
    """Raise `CypherRefusedError` when parameters nest deeper than `MAX_VALUE_DEPTH`, are too large, or
    hold an integer outside Cypher's 64-bit INTEGER (the driver cannot send one: it raised OverflowError)."""
    stack: list[tuple[Any, int]] = [(parameters, 0)]
    size = 0
    while stack:
        value, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            raise _refuse(f"parameters nest more than {MAX_VALUE_DEPTH} levels deep")
        if isinstance(value, dict):
            size += sum(len(str(k)) + 4 for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            size += 2 + len(value)
            stack.extend((v, depth + 1) for v in value)
        else:
            if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
                raise _refuse(f"parameter integer {value} does not fit in 64 bits (Cypher's INTEGER)")
            size += len(value) if isinstance(value, (str, bytes)) else 8
        if size > MAX_PARAMETER_BYTES:
            raise _refuse(f"parameters are larger than {MAX_PARAMETER_BYTES} bytes")


class _RowTooLarge(Exception):
    """A row's JSON cannot fit in what is left of the response limit (caught in `_read_rows`)."""


class _Room:
    """What is left of the response limit while a row is converted. Each value takes a lower bound of
    its JSON size (a container its brackets and separators before its items are visited), so a row
    that cannot fit stops being converted, and copied, as soon as that is known."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, value: Any) -> None:
        if isinstance(value, str):
            self.left -= len(value) + 2
        elif isinstance(value, (list, tuple, dict)):
            self.left -= 2 * max(len(value), 1)  # brackets, then ", " between items
        else:
            self.left -= 1
        if self.left < 0:
            raise _RowTooLarge


def to_json(value: Any, _depth: int = 0, _room: _Room | None = None) -> Any:
    """Graph values as JSON-able data (nodes and relationships as dicts with their labels/type).

    Raises `CypherQueryError` for a value nested deeper than `MAX_VALUE_DEPTH` (a query can build
    one with reduce() although its text is shallow).
    """
    if _depth > MAX_VALUE_DEPTH:
        raise CypherQueryError(f"a returned value nests more than {MAX_VALUE_DEPTH} levels deep")
    if _room is not None:
        _room.take(value)
    deeper = _depth + 1
    if isinstance(value, Node):
        return {
            "_id": value.element_id,
            "_labels": sorted(value.labels),
            **{k: to_json(v, deeper, _room) for k, v in value.items()},
        }
    if isinstance(value, Relationship):
        return {
            "_id": value.element_id,
            "_type": value.type,
            "_start": value.start_node.element_id if value.start_node else None,
            "_end": value.end_node.element_id if value.end_node else None,
            **{k: to_json(v, deeper, _room) for k, v in value.items()},
        }
    if isinstance(value, Path):
        return {
            "nodes": [to_json(n, deeper, _room) for n in value.nodes],
            "relationships": [to_json(r, deeper, _room) for r in value.relationships],
        }
    if isinstance(value, (DateTime, Date, Time, Duration)):
        return value.iso_format()
    if isinstance(value, dict):
        return {k: to_json(v, deeper, _room) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v, deeper, _room) for v in value]
    return value


# -- the path ----------------------------------------------------------------------------------------


class QueryCancel:
    """Stops a running `run_read_only` from another thread: `cancel()` shuts its Bolt connection down,
    so the thread waiting for an answer gets an error at once and the driver drops the connection
    from its pool (Neo4j ends the transaction of a closed connection). Used when the caller gives up
    (client gone, request cancelled, past its limit plus the backstop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.cancelled = False

    def _attach(self, tx: Any) -> None:
        # The driver keeps its socket private; a driver without it leaves only the server's timeout.
        raw = getattr(getattr(getattr(tx, "_connection", None), "socket", None), "_socket", None)
        with self._lock:
            self._socket = raw if isinstance(raw, socket.socket) else None
            if self.cancelled:
                self._shut()

    def _detach(self) -> None:
        # Before the transaction ends: then the connection goes back to the pool, for someone else.
        with self._lock:
            self._socket = None

    def _shut(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        """Stop the query now (a later `_attach` stops it too); safe from any thread, more than once."""
        with self._lock:
            self.cancelled = True
            self._shut()


class _AnswerBudget:
    """Counts the bytes of a query's answer as the driver receives them and breaks the connection once
    they pass `limit`. The driver buffers a whole record before it decodes any of it, so one huge row
    (a list of millions, a string built in the query) is refused with at most `limit` bytes (plus one
    64 KiB chunk) held, never decoded into Python objects. The broken connection leaves the driver's
    pool and Neo4j ends its transaction, as for `QueryCancel`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = 0
        self.exceeded = False
        self._connection: Any = None
        self._socket: Any = None

    def _attach(self, tx: Any) -> None:
        # The driver's socket wrapper keeps its attributes in an instance dict: the counting reader
        # shadows its method for this transaction only. A driver without it leaves the JSON limit.
        self._connection = getattr(tx, "_connection", None)
        bolt: Any = getattr(self._connection, "socket", None)
        receive = getattr(bolt, "recv_into", None)
        if receive is None or not hasattr(bolt, "__dict__"):
            logger.warning("the driver's socket cannot be counted: only the decoded rows are bounded")
            return

        def counted(buffer: Any, nbytes: int) -> int:
            got: int = receive(buffer, nbytes)
            self.received += got
            if self.received > self.limit:
                self.exceeded = True
                # The error's traceback keeps this frame (a log record of it may be kept too): it must
                # not keep the view of the driver's buffer, or the buffer outlives the query.
                del buffer
                raise OSError(f"the answer passed {self.limit} bytes")
            return got

        bolt.recv_into = counted
        self._socket = bolt

    def _detach(self) -> None:
        if self._socket is not None:
            vars(self._socket).pop("recv_into", None)
            self._socket = None
        # The dead connection may outlive the query (the pool drops it at its next use; a log record
        # of the driver's error holds it through the traceback): let go of what it had buffered.
        buffer: Any = getattr(getattr(self._connection, "inbox", None), "_buffer", None)
        if self.exceeded and isinstance(getattr(buffer, "data", None), bytearray):
            buffer.data = bytearray()
            buffer.used = 0
        self._connection = None


def _translate(e: Exception, timeout_s: float, cancel: QueryCancel | None = None) -> CypherGuardError:
    if cancel is not None and cancel.cancelled:
        return CypherUnavailableError("the query was stopped: its caller gave up waiting for it")
    if isinstance(e, (ServiceUnavailable, SessionExpired, OSError)):
        return CypherUnavailableError(f"the graph database is not answering: {e}")
    if isinstance(e, ClientError):
        code = e.code or ""
        if "TransactionTimedOut" in code or "Terminated" in code:
            return CypherTimeoutError(f"the query ran past {timeout_s:g} s and was stopped")
        if "Forbidden" in code or "AccessMode" in code:
            return CypherRefusedError(f"refused by the server: {e.message}")
        if "ExternalResource" in code or "LoadExternalResource" in code:
            return CypherRefusedError(f"refused by the server: {e.message}")
        return CypherQueryError(f"the query failed: {e.message}")
    return CypherQueryError(f"the query failed: {e}")


def run_read_only(
    driver: Driver,
    query: str,
    parameters: dict[str, Any] | None = None,
    *,
    database: str = "neo4j",
    limits: CypherLimits | None = None,
    row_limit: int | None = None,
    timeout_s: float | None = None,
    cancel: QueryCancel | None = None,
) -> CypherResult:
    """Run a reader's `query` with `parameters` through every layer; the one read-only Cypher path.

    Args:
        driver: a driver to the graph's server (its user may be an administrator: the layers below
            are what keep the query a read).
        query: Cypher text from an untrusted caller.
        parameters: `$name` values (JSON-like), bounded by `check_parameters`.
        database: the database to read.
        limits: rows, seconds and response bytes (`CypherLimits()` when None); `row_limit` and
            `timeout_s`, when given, override the matching field.
        cancel: lets another thread stop the query and free its connection at once (`QueryCancel`).

    Returns the rows (at most `row_limit`, at most `max_response_bytes` of JSON; `truncated` says
    more were available). Raises `CypherRefusedError` (not a read, or over an input limit),
    `CypherTimeoutError` (stopped by the server at the timeout), `CypherUnavailableError` (the
    database did not answer, or the query was cancelled) or `CypherQueryError` (anything else the
    database reported, or a row larger than the response limit by itself).
    """
    limits = limits or CypherLimits()
    rows_max = row_limit if row_limit is not None else limits.row_limit
    seconds = timeout_s if timeout_s is not None else limits.timeout_s
    params = parameters or {}
    check_read_only(query)
    check_parameters(params)
    budget = _AnswerBudget(ANSWER_BYTES_PER_RESPONSE_BYTE * limits.max_response_bytes)
    answer: tuple[list[str], list[dict[str, Any]], bool] | None = None
    try:
        with driver.session(
            database=database, default_access_mode=READ_ACCESS, fetch_size=FETCH_SIZE
        ) as session:
            # Explicit transactions: no driver retries, and the timeout is the server's to enforce.
            with session.begin_transaction(timeout=seconds) as tx:
                if cancel is not None:
                    cancel._attach(tx)
                try:
                    summary = tx.run("EXPLAIN " + query, params).consume()
                    check_plan(summary.query_type, summary.plan)
                finally:
                    if cancel is not None:
                        cancel._detach()
            with session.begin_transaction(timeout=seconds) as tx:
                if cancel is not None:
                    cancel._attach(tx)
                budget._attach(tx)
                try:
                    answer = _read_rows(tx, query, params, rows_max, limits, budget)
                finally:
                    budget._detach()
                    if cancel is not None:
                        cancel._detach()
                if not budget.exceeded:  # else the connection is gone, and the transaction with it
                    tx.rollback()
    except (Neo4jError, DriverError, OSError) as e:
        # Rows kept before the answer passed its byte budget stand: only closing the cut connection failed.
        if answer is None or not budget.exceeded:
            raise _translate(e, seconds, cancel) from e
    assert answer is not None
    columns, rows, truncated = answer
    return CypherResult(columns=columns, rows=rows, truncated=truncated, row_limit=rows_max)


def _too_large(limits: CypherLimits) -> CypherAnswerTooLargeError:
    return CypherAnswerTooLargeError(
        f"the first row alone is over the response limit of {limits.max_response_bytes} bytes; return "
        "fewer or smaller values: a slice of a list (list[0..100]), its size(), LIMIT, or fewer columns"
    )


def _converted(record: Any, columns: list[str], room: int) -> tuple[dict[str, Any], int] | None:
    """The row as JSON-able data and its JSON size in bytes, or None when it is over `room` bytes."""
    try:
        left = _Room(room)
        row = {k: to_json(record[k], _room=left) for k in columns}
    except _RowTooLarge:
        return None
    size = len(json.dumps(row, default=str))
    return (row, size) if size <= room else None


def _read_rows(
    tx: Any, query: str, params: dict[str, Any], rows_max: int, limits: CypherLimits, budget: _AnswerBudget
) -> tuple[list[str], list[dict[str, Any]], bool]:
    """The columns, the rows kept (within `rows_max` and the response bytes) and whether more came.

    Raises `CypherAnswerTooLargeError` when not even the first row fits (seen as it arrives, by
    `budget`, or while it is converted); a later row that does not fit ends the rows (truncated)."""
    rows: list[dict[str, Any]] = []
    size = 0
    try:
        result = tx.run(query, params)
        columns = list(result.keys())
        for record in result:
            if len(rows) >= rows_max:
                return columns, rows, True
            row = _converted(record, columns, limits.max_response_bytes - size)
            if row is None:
                if not rows:
                    raise _too_large(limits)
                return columns, rows, True
            rows.append(row[0])
            size += row[1]
    except (Neo4jError, DriverError, OSError) as e:
        if not budget.exceeded:
            raise
        if not rows:
            raise _too_large(limits) from e
        return columns, rows, True
    return columns, rows, False
