"""What every runtime of a worker offers (:class:`Runtime`), how a failing check is signalled inside
the worker (:class:`CandidateFailed`) and how a runtime announces each candidate call to the parent
(:class:`CallWatch`); the host runtime is in :mod:`executor.worker.host`, the GPU runtimes in
:mod:`executor.worker.gpu`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from executor.inputs import InputSet
from executor.protocol import EvaluationOptions
from executor.runlimit import CallLimit
from executor.verdict import ErrorKind, Mismatch, TimingStats
from executor.worker.messages import CALL_ENDED, DONE_FD_ENV, call_started

logger = logging.getLogger(__name__)


class CandidateFailed(Exception):
    """Raised inside the worker when a check fails; carries the outcome fields."""

    def __init__(self, kind: ErrorKind, message: str, mismatch: Mismatch | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.mismatch = mismatch


class CallWatch:
    """Announces each candidate call to the parent on the done pipe (:data:`DONE_FD_ENV`): its start,
    with its limit (:class:`~executor.runlimit.CallLimit`), and its end. The parent kills the worker
    when a call runs past its limit (:meth:`executor.sandbox.WorkerProcess.wait`). Without a limit or
    a pipe (the baseline, a worker run in process) it announces nothing."""

    def __init__(self, limit: CallLimit | None = None, fd: int | None = None) -> None:
        self.limit = limit
        self.fd = fd if limit is not None else None
        # The last announced call's window by this process's clock: from after its start's write to
        # before its end's (None: not announced). The executor's window (the kernel stamps the writes)
        # holds it and the two writes, so the worker can tell when the executor's clock check would
        # refuse; it is the candidate's clock, so it decides nothing but whether a clock-confirming
        # call is made.
        self.window_s: float | None = None

    @classmethod
    def to_parent(cls, limit: CallLimit | None) -> CallWatch:
        """A watch that writes on the pipe the parent named in the environment."""
        fd = os.environ.get(DONE_FD_ENV)
        return cls(limit, int(fd) if fd and fd.isdigit() else None)

    def _write(self, line: bytes) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, line)
        except OSError as e:  # the parent is gone: it can watch nothing any more
            logger.warning("could not announce a call to the parent: %s", e)
            self.fd = None

    @contextlib.contextmanager
    def call(self, what: str, calls: int = 1, seen_ms: float | None = None) -> Iterator[None]:
        """Announce a call (or ``calls`` calls or launches run as one batch) for the time of the block;
        ``seen_ms``: the slowest time per launch of the earlier batches of the same timing loop, which
        the limit is derived from when it is below the limit's own time per call."""
        self.window_s = None
        if self.fd is None or self.limit is None:
            yield
            return
        per_call_ms = self.limit.per_call_ms(seen_ms)
        line = call_started(self.limit.for_calls(calls, seen_ms), calls, per_call_ms, what)
        self._write(line)
        # Both reads inside the writes (review 36c's H2): a candidate that changed the clock can do
        # work at any read of it, and work at these is then inside the executor's window.
        began = time.perf_counter()
        try:
            yield
        finally:
            self.window_s = time.perf_counter() - began
            self._write(CALL_ENDED)


class Runtime:
    """Runs one callable (candidate or baseline) on an input set and times it; each call of the
    callable is announced on ``watch`` (which announces nothing unless the worker sets one)."""

    device = "host-cpu"
    watch = CallWatch()
    # The seed of the spot samples' draws in :meth:`time` (:attr:`CandidateRun.spot_seed`, the
    # executor's); None: this process's own entropy (a baseline's run).
    spot_seed: int | None = None

    def run(
        self, inputs: InputSet, uploaded: dict[str, Any] | None = None, call: str = "a call"
    ) -> dict[str, np.ndarray]:
        """Call on a copy of ``inputs`` (``uploaded``: a device copy of it made ahead, used once, by
        the kernel runtime); return the output arrays. ``call`` names the call to the parent."""
        raise NotImplementedError

    def reset_timing_state(self) -> None:
        """Before the trials, undo what the candidate may have set on a device of its own process
        (:mod:`executor.worker.runner`); the worker resets its own context itself."""

    def check_copies(self, last: dict[str, Any]) -> None:
        """After :meth:`time`: the checks of the copies the trials called on that need nothing of the
        device (a function task's ``in`` arrays, bit for bit); raises :class:`CandidateFailed`. None
        here (a kernel's are on the device)."""

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        """Timing statistics over trials on the rotated copies in ``slots`` (:class:`HostSlots` or
        :class:`DeviceSlots`), and what the last trial left for a final check: the index of its source
        set (``set``) and its outputs, as host arrays (``outputs``) or, for kernels, as the device
        buffers of its rotation slot (``device_outputs``)."""
        raise NotImplementedError
