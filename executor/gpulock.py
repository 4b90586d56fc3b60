"""One lock per executor for the GPU work of its worker processes.

The evaluator serialises the candidates' runs, but a worker also touches the GPU outside its run: a
spare makes its CUDA context and L2-flush buffer while it starts, and a prepared worker uploads its
timing buffers while the candidate before it may still be timed. Any of that during another worker's
trials lands in its samples (a context switch or a copy competing for memory bandwidth; one such
overlap doubled a median on an H100). So every worker holds this lock around its GPU work: its run,
its context creation and its uploads ahead of a candidate.

The lock is an advisory ``flock`` on a file that the parent names in :data:`LOCK_ENV`; the kernel
releases it when its holder dies, so a killed or crashed worker never leaves it held. Without the
variable (a worker run by hand), nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from typing import IO

LOCK_ENV = "REGRAPH_GPU_LOCK"

_state = threading.local()


@contextlib.contextmanager
def gpu_exclusive() -> Iterator[None]:
    """Hold the executor's GPU lock for the block; re-entrant within a thread."""
    path = os.environ.get(LOCK_ENV)
    depth = getattr(_state, "depth", 0)
    if not path or depth:
        _state.depth = depth + 1
        try:
            yield
        finally:
            _state.depth -= 1
        return
    handle: IO[bytes] = open(path, "ab")  # noqa: SIM115 - held across the yield
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _state.depth = 1
        try:
            yield
        finally:
            _state.depth = 0
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()
