"""A job's events as its followers read them: the past ones first, then live ones until the job ends,
with heartbeats while nothing happens (the server-sent events stream and the MCP job status read these)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from api.optimize.models import JobEventPublic
from graphdb.jobs import JobEventRecord


@dataclass(frozen=True)
class Heartbeat:
    """Nothing happened for a while: lets a stream send a keep-alive."""


def public_event(event: JobEventRecord) -> JobEventPublic:
    """A stored event as the API shows it."""
    return JobEventPublic(seq=event.seq, kind=event.kind, at=event.at, data=event.payload)


class Subscription:
    """A job's events: the past ones first, then live ones until the job ends.

    Iterating yields `JobEventPublic`s and, after `heartbeat_s` without an event, a `Heartbeat`.
    """

    def __init__(
        self,
        backlog: list[JobEventRecord],
        queue: asyncio.Queue[JobEventRecord | None] | None,
        on_close: Callable[[], None],
        heartbeat_s: float,
        after: int = -1,
    ) -> None:
        """`queue` is None for a job that already ended (the backlog is then everything)."""
        self._backlog = list(backlog)
        self._queue = queue
        self._on_close = on_close
        self._heartbeat_s = heartbeat_s
        self._last = after

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> JobEventPublic | Heartbeat:
        if self._backlog:
            event = self._backlog.pop(0)
            self._last = event.seq
            return public_event(event)
        if self._queue is None:
            raise StopAsyncIteration
        while True:
            try:
                # Cancelling a queue.get() on timeout is safe (unlike cancelling a generator's step).
                item = await asyncio.wait_for(self._queue.get(), timeout=self._heartbeat_s)
            except TimeoutError:
                return Heartbeat()
            if item is None:  # the job ended
                self.close()
                raise StopAsyncIteration
            if item.seq > self._last:  # the backlog may already hold it
                self._last = item.seq
                return public_event(item)

    def close(self) -> None:
        """Stop following the job."""
        if self._queue is not None:
            self._on_close()
            self._queue = None


async def follow(subscription: Subscription) -> AsyncIterator[JobEventPublic | Heartbeat]:
    """Iterate a subscription, closing it however the consumer stops."""
    try:
        async for item in subscription:
            yield item
    finally:
        subscription.close()
