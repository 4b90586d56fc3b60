"""One holder at a time across the processes of a host: an exclusive ``flock`` on a file.

What the host's executors (a fleet's replicas, a service restarted over its cache) must not do twice at
once, such as building a task's reference or storing its timing set, holds such a lock named after the
work; the second comes in after the first and finds the work done. The kernel releases the lock when
its holder dies, so a killed builder never leaves it held.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold the lock file ``path`` (made with its directory if missing) alone for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
