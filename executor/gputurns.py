"""The evaluator's own lock of its GPU: one candidate's run at a time, and which waiting run goes next.

Every evaluation whose candidate is compiled and whose worker is prepared waits here for its *turn*:
its worker's correctness checks and trials, which nothing of another candidate overlaps (the worker
processes' locks of :mod:`executor.gpulock` keep the rest of the GPU's users, spares making their
CUDA contexts, uploads, host copies, apart from the trials). Who gets the next turn:

- by default, the run that has waited longest (arrival order), which is what the plain lock that this
  replaces did, give or take the operating system's wake-up order;
- an *urgent* run before all others (in arrival order among urgent ones): a task's naive baseline
  (:mod:`executor.baseline`), whose first candidates have run and whose verdicts wait for it, so that
  their callers are not held while later candidates' runs go first;
- with ``kernel_first`` (the executor setting ``gpu_kernel_first``), a waiting *kernel* task's run goes
  before function tasks' runs that came earlier, while the device is *busy* for a function task's
  trials: the device's GPU lock is held by another process (a spare's context creation, another
  executor's work) or finished workers are still being torn down. A function task's trials (timed on
  the host clock) take the GPU lock alone and so wait for all of that, under this lock, while a
  kernel task's trials (timed with CUDA events) run beside it (``executor.gpulock``). So the kernel
  run fills the time that the function run would have spent waiting. A function run is passed over
  at most ``max_skips`` times, then goes whatever the device is doing.

Only the order changes: still one run at a time, so no candidate's trials overlap another candidate's
GPU work.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Literal

from executor.errors import EvaluationCancelled

logger = logging.getLogger(__name__)

Kind = Literal["function", "kernel"]
Holder = Literal["candidate", "baseline"]
POLL_S = 0.05  # how often a waiter looks at its ``cancelled`` event

_ids = count()


@dataclass(eq=False)
class Turn:
    """One run's place in the turns, and what the order did to it."""

    kind: Kind
    skipped: int = 0  # turns given to a later kernel run while this (function) run waited
    ahead: bool = False  # this (kernel) run went before an earlier function run
    urgent: bool = False  # goes before every run that is not
    holder: Holder = "candidate"  # whose run: a candidate's or a task's naive baseline's
    number: int = field(default_factory=lambda: next(_ids))


class GpuTurns:
    """One run at a time; the next one chosen as the module's docstring says. Thread-safe."""

    def __init__(
        self,
        kernel_first: bool = False,
        max_skips: int = 4,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        """``busy``: whether a function task's trials would now wait for other work on the device
        (asked only when ``kernel_first`` is on and both kinds wait)."""
        self.kernel_first = kernel_first
        self.max_skips = max_skips
        self._busy = busy or (lambda: False)
        self._cond = threading.Condition()
        self._waiting: list[Turn] = []  # arrival order
        self._holder: Turn | None = None
        self._holder_since = 0.0  # time.monotonic() when the holder took its turn
        self._granted: Turn | None = None  # chosen for the next turn, not yet taken
        # Turns given to a kernel run ahead of an earlier function run (the setting's effect).
        self.kernel_turns_ahead = 0
        # Since this object was made, per holder: the turns taken and the seconds they were held.
        self._taken: dict[Holder, int] = {"candidate": 0, "baseline": 0}
        self._held_s: dict[Holder, float] = {"candidate": 0.0, "baseline": 0.0}
        self._since = time.monotonic()

    def locked(self) -> bool:
        """Whether a run holds its turn now."""
        with self._cond:
            return self._holder is not None

    def usage(self) -> dict[str, object]:
        """How the turns were used since this object was made: ``seconds`` (the wall time since),
        ``turns`` and ``held_s`` per holder (``candidate``, ``baseline``; a turn held now counts up to
        now), and ``waiting`` (runs waiting now)."""
        with self._cond:
            now = time.monotonic()
            held = dict(self._held_s)
            if self._holder is not None:
                held[self._holder.holder] += now - self._holder_since
            return {
                "seconds": round(now - self._since, 3),
                "turns": dict(self._taken),
                "held_s": {k: round(v, 3) for k, v in held.items()},
                "waiting": len(self._waiting),
            }

    def waiting(self) -> list[Kind]:
        """The kinds of the runs waiting now, in arrival order."""
        with self._cond:
            return [w.kind for w in self._waiting]

    def _choose(self) -> Turn:
        urgent = next((w for w in self._waiting if w.urgent), None)
        if urgent is not None:
            return urgent
        first = self._waiting[0]
        if not self.kernel_first or first.kind == "kernel" or first.skipped >= self.max_skips:
            return first
        kernel = next((w for w in self._waiting if w.kind == "kernel"), None)
        if kernel is None or not self._device_busy():
            return first
        for waiter in self._waiting:
            if waiter is kernel:
                break
            waiter.skipped += 1
        kernel.ahead = True
        self.kernel_turns_ahead += 1
        return kernel

    def _device_busy(self) -> bool:
        try:
            return self._busy()
        except Exception:  # a probe that fails (a lock file gone at shutdown) must not stop the turns
            logger.warning("could not tell whether the device is busy; arrival order", exc_info=True)
            return False

    def _grant(self) -> None:
        """With no run holding or about to take the turn, choose the next (under the condition)."""
        if self._holder is None and self._granted is None and self._waiting:
            self._granted = self._choose()
            self._cond.notify_all()

    @contextlib.contextmanager
    def turn(
        self,
        kind: Kind,
        cancelled: threading.Event | None = None,
        urgent: bool = False,
        holder: Holder = "candidate",
    ) -> Iterator[Turn]:
        """Hold the GPU for the block (which gets this run's :class:`Turn`); while waiting, give up
        once ``cancelled`` is set. An ``urgent`` run goes before those that are not. ``holder`` says
        whose run it is, for :meth:`usage`."""
        if holder not in self._taken:  # before it waits: a turn taken with it could never be given back
            raise ValueError(f"unknown holder of a GPU turn: {holder!r}")
        me = Turn(kind, urgent=urgent, holder=holder)
        with self._cond:
            self._waiting.append(me)
            self._grant()
            while self._granted is not me:
                if cancelled is not None and cancelled.is_set():
                    self._waiting.remove(me)
                    raise EvaluationCancelled("stopped while waiting for the GPU: its caller went away")
                self._cond.wait(POLL_S if cancelled is not None else None)
            self._waiting.remove(me)
            self._granted, self._holder = None, me
            self._holder_since = time.monotonic()
            self._taken[holder] += 1
        try:
            yield me
        finally:
            with self._cond:
                self._held_s[holder] += time.monotonic() - self._holder_since
                self._holder = None
                self._grant()
