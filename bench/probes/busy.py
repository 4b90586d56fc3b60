"""Threads of this process busy in Python, for the probes and GPU tests that time a kernel while the
host is slowed by other threads of the same process (the launch gate's case).

Each thread holds the interpreter between switches. At the default 5-ms switch interval, on the H200's
16-core host (session 27, ``bench/probes/gate_busy_probe.py``), every driver call that lets the
interpreter go waited so long to get it back that one kernel timing took 24 s with one busy thread and
none ended within 30 s with two: what such a run measures is the interpreter's hand-over, not the
timing. :func:`busy_interpreter` therefore sets a short switch interval (0.1 ms, about one small
kernel's time per hand-over) while its threads run, and restores the old one after.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import numpy as np

SWITCH_S = 1e-4


def _work(stop: threading.Event) -> None:
    a = np.ones(4096)
    while not stop.is_set():
        total = 0
        for i in range(2000):
            total += i
        np.add(a, 1.0, out=a)


@contextlib.contextmanager
def busy_interpreter(count: int, switch_s: float | None = SWITCH_S) -> Iterator[None]:
    """``count`` busy threads while the block runs, at a switch interval of ``switch_s`` (None, or no
    threads: the interpreter's own); both undone when it ends, however it ends."""
    stop = threading.Event()
    threads = [threading.Thread(target=_work, args=(stop,), daemon=True) for _ in range(count)]
    interval = sys.getswitchinterval()
    if switch_s is not None and count > 0:
        sys.setswitchinterval(switch_s)
    try:
        for t in threads:
            t.start()
        yield
    finally:
        stop.set()
        for t in threads:
            if t.is_alive():
                t.join()
        sys.setswitchinterval(interval)
