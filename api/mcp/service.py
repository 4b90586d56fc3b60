"""What every feature's MCP tools work with (no MCP imports here): the running API's services, bounded.

Every operation goes through a service the HTTP API uses too: the graph service, the read-only Cypher
path of ``/v1/cypher``, the job service of ``/v1/optimize`` (the same queue and the same jobs), and the
executor client that optimization jobs use. Blocking calls run in worker threads, so a slow read or a
long evaluation never holds up the server. Graph work is bounded twice: every transaction of the tools'
store carries the read time limit as a server-side timeout (Neo4j stops it, lock waits included, and
the worker thread is free again), and the tool itself stops waiting a few seconds later (`BACKSTOP_S`)
in case Neo4j does not answer at all. Either way the agent gets a tool error saying so instead of a
call that never ends. Results are plain JSON-able dicts, cut to a size limit with a note saying what
was cut (`cap`). Errors are `ServiceError`s; `api.mcp.tools.tool_error` is the one mapping to MCP.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio
from pydantic import BaseModel

from api.auth import Caller
from api.errors import ServiceError, ServiceErrorKind, ServiceUnavailableError
from api.graph.errors import GraphUnavailableError
from api.graph.service import GraphServices
from api.mcp.settings import McpSettings
from api.optimize.service import JobService
from api.state import AppState
from graphdb.errors import GraphDBError
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

_SHORTEST_CUT = 200  # strings are never cut below this many characters
BACKSTOP_S = 5.0
"""How much longer than its server-side timeout a tool waits for the graph before giving up on it: Neo4j
checks timeouts every 2 s (db.transaction.monitor.check.interval), plus the round trip."""


# -- result size ------------------------------------------------------------------------------------------


def _size(data: Any) -> int:
    return len(json.dumps(data, default=str, ensure_ascii=False))


def _shorten_strings(data: Any, limit: int) -> Any:
    if isinstance(data, str) and len(data) > limit:
        return f"{data[:limit]}... [cut: {len(data) - limit} more characters]"
    if isinstance(data, dict):
        return {k: _shorten_strings(v, limit) for k, v in data.items()}
    if isinstance(data, list):
        return [_shorten_strings(v, limit) for v in data]
    return data


def _largest_list(data: Any) -> list[Any] | None:
    """The list (anywhere in `data`) whose JSON is largest, among lists of two or more items."""
    best: list[Any] | None = None
    best_size = -1
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            if len(item) > 1:
                size = _size(item)
                if size > best_size:
                    best, best_size = item, size
            stack.extend(item)
    return best


def cap(data: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """`data` cut to at most about `max_chars` characters of JSON, with a `note` saying what was cut.

    Long strings (code) are shortened first, down to a floor; then the largest lists lose their tail.
    """
    if _size(data) <= max_chars:
        return data
    notes: list[str] = []
    limit = 8_000
    shortened: Any = data
    while limit >= _SHORTEST_CUT:
        shortened = _shorten_strings(data, limit)
        if _size(shortened) <= max_chars:
            break
        limit //= 2
    limit = max(limit, _SHORTEST_CUT)
    notes.append(f"strings longer than {limit} characters were cut")
    cut: dict[str, Any] = json.loads(json.dumps(shortened, default=str))  # a copy whose lists may be cut
    dropped = 0
    while _size(cut) > max_chars:
        longest = _largest_list(cut)
        if longest is None:
            break
        keep = len(longest) // 2
        dropped += len(longest) - keep
        del longest[keep:]
    if dropped:
        notes.append(f"{dropped} list items were left out")
    note = (
        f"result cut to fit {max_chars} characters: {'; '.join(notes)}. Ask for less "
        "(a smaller limit, a narrower query) or read one item at a time."
    )
    previous = cut.get("note")
    cut["note"] = f"{previous} {note}" if previous else note
    return cut


def dump(model: BaseModel) -> dict[str, Any]:
    """A wire model as JSON-able data."""
    data: dict[str, Any] = model.model_dump(mode="json")
    return data


# -- the service ------------------------------------------------------------------------------------------


@dataclass
class ProgressReporter:
    """Where a long operation reports progress (the MCP progress notification of the call, if asked for)."""

    report: Callable[[float, float | None, str], Awaitable[None]]


async def _no_progress(progress: float, total: float | None, message: str) -> None:
    return None


NO_PROGRESS = ProgressReporter(_no_progress)


def require(caller: Caller, role: Role) -> None:
    """Raise a `forbidden` `ServiceError` unless `caller` has at least `role`."""
    if not caller.may(role):
        who = "anonymous callers only read" if caller.key_id is None else f"the key {caller.name!r}"
        raise ServiceError(
            f"this tool needs an API key with the {role.value} role; {who} ({caller.role.value})",
            kind=ServiceErrorKind.FORBIDDEN,
        )


class ReasoningGraphService:
    """What the MCP tools of every feature (api/<feature>/mcp.py) work with: the running API's state
    (graph, driver, jobs, settings), reads bounded in time, results bounded in size."""

    def __init__(self, state: AppState, settings: McpSettings) -> None:
        """Serve from `state` (opened by the API's lifespan or by `regraph mcp`) within `settings`."""
        if state.graph_store is None or state.embedder is None:
            raise ServiceUnavailableError("the graph store is starting or stopping")
        self.state = state
        self.settings = settings
        # The tools' own store over the API's driver: each transaction carries the read time limit.
        store = Neo4jGraphStore(state.driver, state.target.database, timeout_s=settings.read_timeout_s)
        self.graph = GraphServices.over(store, state.embedder)

    async def bounded(self, timeout_s: float, call: Callable[[], Awaitable[T]]) -> T:
        """Await `call()`, giving up `BACKSTOP_S` after `timeout_s` (the server-side limit it runs under)."""
        try:
            with anyio.fail_after(timeout_s + BACKSTOP_S):
                return await call()
        except TimeoutError as e:
            raise ServiceUnavailableError(
                f"the graph database did not answer within {timeout_s + BACKSTOP_S:g} s "
                f"(limit REGRAPH_MCP_READ_TIMEOUT_S={self.settings.read_timeout_s:g} s); it may be "
                "overloaded or down: try again later"
            ) from e

    async def read(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking graph read in a worker thread, within the read time limit."""

        async def in_thread() -> T:
            return await anyio.to_thread.run_sync(lambda: call(*args, **kwargs), abandon_on_cancel=True)

        try:
            return await self.bounded(self.settings.read_timeout_s, in_thread)
        except GraphUnavailableError as e:
            raise ServiceUnavailableError(
                f"{e} (limit REGRAPH_MCP_READ_TIMEOUT_S={self.settings.read_timeout_s:g} s)"
            ) from e
        except GraphDBError as e:
            raise ServiceUnavailableError(f"the graph failed: {e}") from e

    async def jobs_call(self, call: Callable[[], Awaitable[T]]) -> T:
        """A job service call (its records live in the graph database), bounded like a graph read."""
        return await self.bounded(self.settings.read_timeout_s, call)

    def capped(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` within the result size limit."""
        return cap(data, self.settings.max_result_chars)

    @property
    def jobs(self) -> JobService:
        """The API's job service (the queue that /v1/optimize feeds)."""
        if self.state.jobs is None:
            raise ServiceUnavailableError("the job service is starting or stopping")
        return self.state.jobs
