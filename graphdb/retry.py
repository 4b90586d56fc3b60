"""Managed transactions retried as the driver retries them, except when the server refused the connection.

The driver retries a managed transaction on every retryable error for `max_transaction_retry_time`,
a refused connection included. On a single server a refused connection means that nothing listens
at its address (the process is gone or not started yet): retrying only makes the caller wait (10 s on
every graph read of a route, answered 503 in the end anyway). `retried` retries what the driver would
(transient errors, a dropped connection, a connection that timed out) within the same time, and lets
a refused connection through at once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from neo4j.exceptions import DriverError, Neo4jError

logger = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_TIME_S = 10.0
"""How long a failed transaction is retried (from its first failure), here and in the driver's config."""
INITIAL_RETRY_DELAY_S = 1.0  # the driver's: doubled after each try, with ±20 % jitter
NO_DRIVER_RETRIES = 0.0
"""A session's `max_transaction_retry_time` for a call that `retried` retries: one try in the driver."""


def connection_refused(error: BaseException) -> bool:
    """Whether `error` comes of a refused TCP connection (its cause or context is one)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, ConnectionRefusedError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def retried(attempt: Callable[[], T], *, within_s: float = RETRY_TIME_S) -> T:
    """`attempt()`, tried again on a retryable driver or server error for up to `within_s` seconds after
    its first failure (the driver's delays: 1 s, doubled after each try, ±20 %); an error that is not
    retryable, a refused connection, or one left when the time is up is raised."""
    delay = INITIAL_RETRY_DELAY_S
    first_failure: float | None = None
    while True:
        try:
            return attempt()
        except (DriverError, Neo4jError) as e:
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            if not e.is_retryable() or connection_refused(e) or now - first_failure > within_s:
                raise
            # Never asleep past the time: the last try comes at its end at the latest.
            wait = min(delay * random.uniform(0.8, 1.2), within_s - (now - first_failure))
            logger.warning("graph transaction failed, retried in %.1f s: %s", wait, e)
        time.sleep(wait)
        delay *= 2
