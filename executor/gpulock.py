"""One lock per executor for the GPU work of its worker processes, shared or exclusive.

The evaluator serialises the candidates' runs, but a worker also touches the GPU outside its run: a
spare makes its CUDA context and L2-flush buffer while it starts, and a prepared worker uploads its
timing buffers while the candidate before it may still be timed. What must not overlap a candidate's
trials holds the lock *exclusively*; what the trials cannot see holds it *shared*, so that it overlaps
other shared work and the trials that tolerate it:

- exclusive: a function task's run (its calls are timed on the host clock, copies included, so any
  other GPU or PCIe traffic lands in its samples), and a prepared worker's timing buffers: uploads
  (another process's 256 MB upload moved a memory-bound kernel's event-timed p90 by 1.5 %:
  bench/device/overlap_probe.py, bench/results/2026-11-27_h200_s11/call2_overlap/) and a function
  task's host copies (made beside a function task's trials, they doubled its trials on the H200);
- shared: a kernel task's run (its launches are timed with CUDA events on its own stream: in the same
  probe, other processes' context creation, teardown and kernels left the medians and p90 within
  0.4 %) and a spare's context creation.

A process that asks for the exclusive lock first takes a turnstile, which shared requests also pass
through: once an exclusive request waits, no new shared holder gets in before it (no starvation).

The lock is an advisory ``flock`` on a file that the parent names in :data:`LOCK_ENV` (the turnstile
is that path + ``.turn``); the kernel releases it when its holder dies, so a killed or crashed worker
never leaves it held. Without the variable (a worker run by hand), nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

LOCK_ENV = "REGRAPH_GPU_LOCK"

Mode = Literal["exclusive", "shared"]

_state = threading.local()


def turnstile_path(lock: str | os.PathLike[str]) -> Path:
    """The turnstile file beside the lock file ``lock``."""
    return Path(os.fspath(lock) + ".turn")


@contextlib.contextmanager
def gpu_lock(mode: Mode) -> Iterator[None]:
    """Hold the executor's GPU lock in ``mode`` for the block. Re-entrant within a thread: a nested
    use holds whatever the outer one holds (an exclusive use inside a shared one is a programming
    error, raised as RuntimeError, since converting a held flock is not atomic)."""
    path = os.environ.get(LOCK_ENV)
    depth = getattr(_state, "depth", 0)
    if depth and mode == "exclusive" and getattr(_state, "mode", "exclusive") == "shared":
        raise RuntimeError("the GPU lock is held shared here: it cannot be taken exclusively inside")
    if not path or depth:
        _state.depth = depth + 1
        try:
            yield
        finally:
            _state.depth -= 1
        return
    handle: IO[bytes] = open(path, "ab")  # noqa: SIM115 - held across the yield
    try:
        with turnstile_path(path).open("ab") as turn:
            fcntl.flock(turn, fcntl.LOCK_EX)
            # An exclusive request keeps the turnstile until it holds the lock; a shared one only
            # passes through it. The turnstile is released when ``turn`` closes.
            fcntl.flock(handle, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH)
        _state.depth, _state.mode = 1, mode
        try:
            yield
        finally:
            _state.depth = 0
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def gpu_exclusive() -> contextlib.AbstractContextManager[None]:
    """Hold the GPU lock alone (see the module's docstring for who does)."""
    return gpu_lock("exclusive")


def gpu_shared() -> contextlib.AbstractContextManager[None]:
    """Hold the GPU lock alongside other shared holders, never alongside an exclusive one."""
    return gpu_lock("shared")
