"""`TrialPolicy`: when a candidate's timing stops warming up and stops timing, as plain numbers.

Apart from :mod:`executor.checking`, which applies it, so that the wire protocol
(:meth:`executor.protocol.EvaluationOptions.trial_policy`) can build one without importing the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrialPolicy:
    """When to stop warming up and timing: see :func:`executor.checking.measure` and
    :func:`executor.checking.measure_batched`."""

    warmup: int
    min_trials: int
    max_trials: int
    min_total_ms: float
    target_error: float = 0.0
    max_wall_s: float = float("inf")
    warmup_ms: float = 0.0
    settle: float = 0.0
    max_warmup_ms: float = 0.0
    # Trial i runs on input set i % groups (the rotated timing sets). With more than one, the spread
    # that decides when to stop is measured within each set (executor.checking.within_set_cov), so
    # that honest differences between the sets' values do not count as noise.
    groups: int = 1
    # With more than one group: once the repeat visits (trial ``groups`` on) hold this many pairs of
    # samples of one set, the spread is measured over them alone, the first visits left out
    # (executor.checking.within_set_cov), and the median reported over them alone
    # (executor.checking.TrialSamples); 0: every pair and every trial, first visits included.
    repeat_pairs: int = 0
