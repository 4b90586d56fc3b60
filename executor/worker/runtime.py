"""What every runtime of a worker offers (:class:`Runtime`) and how a failing check is signalled inside
the worker (:class:`CandidateFailed`); the host runtime is in :mod:`executor.worker.host`, the GPU
runtimes in :mod:`executor.worker.gpu`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from executor.inputs import InputSet
from executor.protocol import EvaluationOptions
from executor.verdict import ErrorKind, Mismatch, TimingStats


class CandidateFailed(Exception):
    """Raised inside the worker when a check fails; carries the outcome fields."""

    def __init__(self, kind: ErrorKind, message: str, mismatch: Mismatch | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.mismatch = mismatch


class Runtime:
    """Runs one callable (candidate or baseline) on an input set and times it."""

    device = "host-cpu"

    def run(self, inputs: InputSet, uploaded: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Call on a copy of ``inputs`` (``uploaded``: a device copy of it made ahead, used once, by
        the kernel runtime); return the output arrays."""
        raise NotImplementedError

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        """Timing statistics over trials on the rotated copies in ``slots`` (:class:`HostSlots` or
        :class:`DeviceSlots`), and what the last trial left for a final check: the index of its source
        set (``set``) and its outputs, as host arrays (``outputs``) or, for kernels, as the device
        buffers of its rotation slot (``device_outputs``)."""
        raise NotImplementedError
