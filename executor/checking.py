"""Output comparison and timing statistics, shared by the GPU and host worker paths."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from executor.inputs import INT_POISON
from executor.taskformat import ArrayArg, FunctionTask, KernelTask, Size, is_float
from executor.verdict import ErrorKind, Mismatch, TimingStats


def compare_output(
    task: FunctionTask | KernelTask,
    arg: ArrayArg,
    got: np.ndarray,
    expected: np.ndarray,
    size: Size,
    seed: int,
) -> tuple[ErrorKind, Mismatch] | None:
    """Compare one output with the reference; None when every element passes.

    Floats pass when ``|got-ref| <= atol + rtol*|ref|`` (NaN never passes); integers must be equal.
    Elements still holding the poison value are reported as ``unwritten_output``.
    """
    rule = task.compare_rule(arg)
    if got.shape != expected.shape:
        return ErrorKind.WRONG_OUTPUT, Mismatch(
            arg=arg.name,
            index=0,
            expected=str(expected.shape),
            got=str(got.shape),
            count=expected.size,
            total=expected.size,
            size=size,
            seed=seed,
        )
    if is_float(arg.dtype):
        unwritten = np.isnan(got)
    else:
        unwritten = got == INT_POISON[arg.dtype]
        # A sentinel the reference also produced is a legitimate value, not an unwritten slot.
        unwritten &= expected != INT_POISON[arg.dtype]
    a, b = (np.sort(got), np.sort(expected)) if rule.mode == "sorted" else (got, expected)
    if is_float(arg.dtype) and rule.mode != "exact":
        with np.errstate(invalid="ignore", over="ignore"):
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            ok = np.abs(a64 - b64) <= (rule.atol or 0.0) + (rule.rtol or 0.0) * np.abs(b64)
        ok &= ~np.isnan(a)
    else:
        ok = a == b
        if is_float(arg.dtype):
            ok &= ~np.isnan(a)
    if bool(ok.all()):
        return None
    bad = np.flatnonzero(~ok)
    first = int(bad[0])
    kind = ErrorKind.UNWRITTEN_OUTPUT if bool(unwritten.any()) else ErrorKind.WRONG_OUTPUT
    return kind, Mismatch(
        arg=arg.name,
        index=first,
        expected=repr(b[first].item()),
        got=repr(a[first].item()),
        count=int(bad.size),
        total=int(expected.size),
        size=size,
        seed=seed,
    )


StopReason = Literal["stable", "min_time", "max_trials", "time_cap"]


def robust_cov(samples_ms: list[float]) -> float:
    """1.4826 * median absolute deviation / median: a CoV that one stray trial does not inflate."""
    arr = np.asarray(samples_ms, dtype=np.float64)
    med = float(np.median(arr))
    if med <= 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(arr - med)) / med)


def timing_stats(samples_ms: list[float], stop: StopReason | None = None) -> TimingStats:
    """Median, spread (IQR) and coefficients of variation of timing samples."""
    arr = np.asarray(samples_ms, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    mean = float(arr.mean())
    return TimingStats(
        trials=int(arr.size),
        median_ms=float(med),
        mean_ms=mean,
        min_ms=float(arr.min()),
        max_ms=float(arr.max()),
        iqr_ms=float(q3 - q1),
        cov=float(arr.std() / mean) if mean > 0 else 0.0,
        robust_cov=robust_cov(samples_ms),
        stop=stop,
    )


@dataclass(frozen=True)
class TrialPolicy:
    """When to stop timing: see :func:`measure`."""

    warmup: int
    min_trials: int
    max_trials: int
    min_total_ms: float
    target_error: float = 0.0
    max_wall_s: float = float("inf")
    warmup_ms: float = 0.0


def measure(trial: Callable[[int], float], policy: TrialPolicy) -> tuple[list[float], StopReason]:
    """Run ``trial(i)`` (which returns the milliseconds of its timed region) after at least
    ``policy.warmup`` untimed calls lasting at least ``policy.warmup_ms`` of wall time, and stop
    adaptively.

    After at least ``min_trials`` samples and ``min_total_ms`` of timed work, timing stops as soon as
    the median is known well enough: its relative standard error, estimated robustly as
    ``1.2533 * robust_cov / sqrt(n)``, is at most ``target_error`` (with ``target_error <= 0``: at once,
    the fixed rule). A candidate whose times keep scattering runs on until ``max_trials`` or until the
    trials have taken ``max_wall_s`` of wall time, whichever comes first.
    """
    # Warm-up by count and by time: a GPU that idled drops its clocks, and a few launches of a short
    # kernel are over before the clocks are back up, which would leave the first trials slow.
    warm_start = time.perf_counter()
    i = 0
    while i < policy.warmup or (time.perf_counter() - warm_start) * 1000.0 < policy.warmup_ms:
        trial(-1 - i)
        i += 1
        if i >= 10 * max(policy.max_trials, 1):  # a stuck clock must not spin forever
            break
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        samples.append(trial(len(samples)))
        n = len(samples)
        if n >= policy.max_trials:
            return samples, "max_trials"
        if n < policy.min_trials:
            continue
        if sum(samples) >= policy.min_total_ms:
            if policy.target_error <= 0:
                return samples, "min_time"
            if median_error(samples) <= policy.target_error:
                return samples, "stable"
        if time.perf_counter() - start >= policy.max_wall_s:
            return samples, "time_cap"


def median_error(samples_ms: list[float]) -> float:
    """Relative standard error of the median (normal approximation with a robust spread)."""
    return 1.2533 * robust_cov(samples_ms) / float(np.sqrt(len(samples_ms)))
