"""Evaluation slots shared fairly between callers (issue 27: one key must not hold every compile slot).

An executor runs at most ``total`` evaluations at once (each compiles, then runs); a caller (the API
key on whose behalf the API asks, passed as ``EvaluateRequest.caller``) holds at most ``per_caller`` of
them, ``ceil(total / 2)`` unless set: two 180 s compiles of one reader then leave a slot for everyone
else. Requests without a caller (the executor's own clients: the CLI, batch jobs, tests) are not held
to a share, so a lone batch keeps every slot; they still count towards the total. Waiters are served
in arrival order among those whose caller is under its share.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

ANONYMOUS = "(no caller)"


class FairSlots:
    """``await slots.run(caller, pool, fn, ...)`` runs once a slot is free and ``caller`` is under its share."""

    def __init__(self, total: int, per_caller: int | None = None) -> None:
        if total < 1:
            raise ValueError("at least one slot")
        self.total = total
        self.per_caller = max(1, min(total, per_caller or math.ceil(total / 2)))
        self._held: Counter[str] = Counter()
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []

    @property
    def in_use(self) -> int:
        """Slots held now."""
        return sum(self._held.values())

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return len(self._waiting)

    def held_by(self, caller: str | None) -> int:
        """Slots ``caller`` holds now."""
        return self._held[caller or ANONYMOUS]

    def _may_take(self, caller: str) -> bool:
        share = self.total if caller == ANONYMOUS else self.per_caller
        return self.in_use < self.total and self._held[caller] < share

    def _wake(self) -> None:
        for caller, waiter in list(self._waiting):
            if waiter.done():
                self._waiting.remove((caller, waiter))
            elif self._may_take(caller):
                self._waiting.remove((caller, waiter))
                self._held[caller] += 1  # taken on the waiter's behalf, so no later arrival overtakes it
                waiter.set_result(None)

    async def acquire(self, caller: str | None) -> None:
        """Wait for a slot for ``caller`` and take it (give it back with :meth:`release`)."""
        who = caller or ANONYMOUS
        if self._may_take(who) and not any(c == who or self._may_take(c) for c, _ in self._waiting):
            self._held[who] += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((who, waiter))
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(who)  # granted just as the wait was cancelled: hand it on
            else:
                waiter.cancel()
                self._waiting = [(c, w) for c, w in self._waiting if w is not waiter]
            raise

    def release(self, caller: str | None) -> None:
        """Give back a slot of ``caller``'s; the longest waiter that may take it gets it."""
        who = caller or ANONYMOUS
        self._held[who] -= 1
        if self._held[who] <= 0:
            del self._held[who]
        self._wake()

    async def run(self, caller: str | None, pool: Executor, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in ``pool`` within a slot of ``caller``'s. The slot is held until the call
        ends in its thread, even when the awaiting request is cancelled (a thread cannot be stopped;
        it ends soon after, on its cancelled event), so the pool is never asked for more than its
        size."""
        await self.acquire(caller)
        loop = asyncio.get_running_loop()
        try:
            future = pool.submit(fn, *args)
        except BaseException:
            self.release(caller)
            raise

        def released(_: object) -> None:
            # A call that ends after the service's loop closed (its stop did not wait for it) has no
            # slot left to give back: the slots went with the loop (CI of stop 48 logged the closed
            # loop's RuntimeError as an error of the callback).
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # closed between the check and the call
                    loop.call_soon_threadsafe(self.release, caller)

        future.add_done_callback(released)
        return await asyncio.wrap_future(future)
