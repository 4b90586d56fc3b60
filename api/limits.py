"""One limiter for every face: per-key and global slots for the work that holds scarce resources.

A reader's Cypher query holds a thread and a Bolt connection; an evaluation holds an executor request.
``/v1``, ``/ui`` and ``/mcp`` all take their slots from the app's one `Limiter` (made once per app from
the settings, `Limiter.from_settings`, kept on `api.state.AppState`), so a key gets the same number of
slots whichever face it calls through, and all keys together no more than the server's total.

A slot is held as long as the work really runs, not as long as someone waits for it: a thread started
by `Limiter.run_in_thread` frees its slot when the thread ends. A call given up (the client went away,
the request was cancelled, the time limit passed) calls the work's `abandon` hook at once (for a
query: shut its connection down, `graphdb.cypher_guard.QueryCancel`), so the thread, the slot and the
connection are free again within a round trip instead of when the database gets round to answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from api.errors import ServiceError, ServiceErrorKind

if TYPE_CHECKING:
    from api.settings import ApiSettings

T = TypeVar("T")

Kind = Literal["cypher", "evaluation"]
POLL_S = 0.05  # how often a call waiting for a slot in all, or for its thread, looks again
DISCONNECT_POLL_S = 0.5  # how often a running call asks whether its client is still there


@dataclass(frozen=True)
class SlotLimit:
    """At most `total` calls of one kind at once, at most `per_key` of one key; a call waits at most
    `wait_s` for a slot in all (a key over its own share is refused at once)."""

    total: int
    per_key: int
    wait_s: float = 5.0


class LimitError(ServiceError):
    """Base of the limiter's refusals (of `work`, a kind of call); `retry_after_s` is a fair time to try
    again."""

    kind = ServiceErrorKind.UNAVAILABLE

    def __init__(self, message: str, *, work: Kind, retry_after_s: int = 1) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
        self.work = work


class KeyBusyError(LimitError):
    """This key already runs as many calls of this kind as it may (HTTP 429)."""

    kind = ServiceErrorKind.TOO_MANY


class ServerBusyError(LimitError):
    """Every slot of this kind stayed taken for as long as a call may wait (HTTP 503)."""


class OverTimeError(LimitError):
    """The work did not end within its limit (plus the backstop) and was abandoned."""


class ClientGoneError(LimitError):
    """The caller went away; its work was abandoned."""


class Ticket:
    """One held slot; `release` gives it back (once, whoever calls it)."""

    def __init__(self, limiter: Limiter, kind: Kind, key: str) -> None:
        self._limiter, self.kind, self.key = limiter, kind, key
        self._released = False

    def release(self) -> None:
        """Give the slot back (a second call does nothing)."""
        with self._limiter._lock:
            if self._released:
                return
            self._released = True
            self._limiter._give_back(self.kind, self.key)


_WHAT = {"cypher": "Cypher queries", "evaluation": "evaluations"}


class Limiter:
    """Per-key and global slots per kind of work, shared by every face of one app (thread-safe)."""

    def __init__(self, limits: dict[Kind, SlotLimit]) -> None:
        """Slots of each kind as `limits` says."""
        self.limits = dict(limits)
        self._lock = threading.Lock()
        self._all: Counter[Kind] = Counter()
        self._keys: dict[Kind, Counter[str]] = {kind: Counter() for kind in self.limits}

    @classmethod
    def from_settings(cls, settings: ApiSettings) -> Limiter:
        """The app's limiter, from REGRAPH_CYPHER_MAX_CONCURRENT(_PER_KEY), REGRAPH_EVALUATION_MAX_CONCURRENT
        (_PER_KEY) and REGRAPH_SLOT_WAIT_S."""
        return cls(
            {
                "cypher": SlotLimit(
                    settings.cypher_max_concurrent,
                    settings.cypher_max_concurrent_per_key,
                    settings.slot_wait_s,
                ),
                "evaluation": SlotLimit(
                    settings.evaluation_max_concurrent,
                    settings.evaluation_max_concurrent_per_key,
                    settings.slot_wait_s,
                ),
            }
        )

    def running(self, kind: Kind, key: str | None = None) -> int:
        """How many calls of `kind` hold a slot (of `key`, or in all)."""
        with self._lock:
            return self._all[kind] if key is None else self._keys[kind][key]

    def _give_back(self, kind: Kind, key: str) -> None:
        self._all[kind] -= 1
        self._keys[kind][key] -= 1
        if self._keys[kind][key] <= 0:
            del self._keys[kind][key]

    def _try_take(self, kind: Kind, key: str) -> Ticket | None:
        limit = self.limits[kind]
        with self._lock:
            if self._keys[kind][key] >= limit.per_key:
                raise KeyBusyError(
                    f"this key already runs {limit.per_key} {_WHAT[kind]} at once (its limit, the same on "
                    "/v1, /ui and /mcp); wait for one to finish",
                    work=kind,
                )
            if self._all[kind] >= limit.total:
                return None
            self._all[kind] += 1
            self._keys[kind][key] += 1
            return Ticket(self, kind, key)

    def take(self, kind: Kind, key: str) -> Ticket:
        """A slot of `key` now, or `KeyBusyError` / `ServerBusyError` (no waiting)."""
        ticket = self._try_take(kind, key)
        if ticket is None:
            raise self._server_busy(kind, waited_s=0.0)
        return ticket

    async def acquire(self, kind: Kind, key: str) -> Ticket:
        """A slot of `key`: refused at once (`KeyBusyError`) when the key holds all of its own, else
        waits up to the kind's `wait_s` for one in all (`ServerBusyError` after that)."""
        limit = self.limits[kind]
        deadline = time.monotonic() + limit.wait_s
        while True:
            ticket = self._try_take(kind, key)
            if ticket is not None:
                return ticket
            if time.monotonic() >= deadline:
                raise self._server_busy(kind, waited_s=limit.wait_s)
            await asyncio.sleep(POLL_S)

    def _server_busy(self, kind: Kind, *, waited_s: float) -> ServerBusyError:
        return ServerBusyError(
            f"the server already runs {self.limits[kind].total} {_WHAT[kind]} at once (waited "
            f"{waited_s:g} s for a slot); try again shortly",
            work=kind,
            retry_after_s=2,
        )

    @asynccontextmanager
    async def slot(self, kind: Kind, key: str) -> AsyncIterator[Ticket]:
        """Hold a slot of `key` for the block (async work: an evaluation's executor request)."""
        ticket = await self.acquire(kind, key)
        try:
            yield ticket
        finally:
            ticket.release()

    async def run_in_thread(
        self,
        kind: Kind,
        key: str,
        work: Callable[[], T],
        *,
        limit_s: float,
        abandon: Callable[[], None] = lambda: None,
        disconnected: Callable[[], Awaitable[bool]] | None = None,
    ) -> T:
        """Run blocking `work` in a thread of its own under a slot of `key`; its result or its exception.

        The slot is freed when the thread ends. The call is given up, and `abandon` called (from this
        thread: it must be safe while `work` runs), when it is cancelled, when `disconnected()` says the
        client is gone (`ClientGoneError`), or `limit_s` after it started (`OverTimeError`).
        """
        ticket = await self.acquire(kind, key)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(result: T | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

        def run() -> None:
            result: T | None = None
            error: BaseException | None = None
            try:
                result = work()
            except BaseException as e:  # handed to the waiting call
                error = e
            finally:
                ticket.release()
            # A loop already gone (shut-down) raises RuntimeError: nobody waits for this any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, result, error)

        context = contextvars.copy_context()  # the request's logging context goes along
        threading.Thread(target=context.run, args=(run,), name=f"{kind}-call", daemon=True).start()
        deadline = loop.time() + limit_s
        next_look = loop.time() + DISCONNECT_POLL_S
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise OverTimeError(
                        f"no answer within {limit_s:g} s: the call was stopped", work=kind, retry_after_s=5
                    )
                done, _ = await asyncio.wait({future}, timeout=min(left, DISCONNECT_POLL_S))
                if done:
                    return future.result()
                if disconnected is not None and loop.time() >= next_look:
                    next_look = loop.time() + DISCONNECT_POLL_S
                    if await disconnected():
                        raise ClientGoneError("the client went away: the call was stopped", work=kind)
        except BaseException:
            if not future.done():
                abandon()
                future.cancel()
            raise
