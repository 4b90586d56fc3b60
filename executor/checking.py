"""Output comparison and timing statistics, shared by the GPU and host worker paths."""

from __future__ import annotations

from collections.abc import Callable

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
        ok = (a == b) & ~(np.isnan(a) if is_float(arg.dtype) else False)
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


def timing_stats(samples_ms: list[float]) -> TimingStats:
    """Median, spread (IQR) and coefficient of variation of timing samples."""
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
    )


def measure(
    trial: Callable[[int], float], warmup: int, min_trials: int, max_trials: int, min_total_ms: float
) -> list[float]:
    """Run ``trial(i)`` (which returns the milliseconds of its timed region) after ``warmup`` untimed
    calls, until at least ``min_trials`` samples and ``min_total_ms`` of timed work, or ``max_trials``."""
    for i in range(warmup):
        trial(-1 - i)
    samples: list[float] = []
    while len(samples) < max_trials and (len(samples) < min_trials or sum(samples) < min_total_ms):
        samples.append(trial(len(samples)))
    return samples
