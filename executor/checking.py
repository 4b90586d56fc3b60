"""Output comparison and timing statistics, shared by the GPU and host worker paths."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from executor.inputs import INT_POISON
from executor.taskformat import ArrayArg, FunctionTask, KernelTask, Size, is_float
from executor.trialpolicy import TrialPolicy
from executor.verdict import ErrorKind, Mismatch, TimingStats

# Elements per block of the fast comparison: two float64 scratch blocks of this size stay in the CPU's
# L2, where whole-array float64 temporaries of a timing-size output (hundreds of MB, freshly
# page-faulted in every worker process) took seconds.
COMPARE_BLOCK = 1 << 16
# Outputs of at least this many elements are compared by several threads, each over its own range of
# blocks (numpy releases the GIL inside its loops): a timing-size output is tens of millions of
# elements, compared twice per evaluation on the critical path.
PARALLEL_MIN = 1 << 20
COMPARE_THREADS = max(1, min(8, os.cpu_count() or 1))
_compare_pool: ThreadPoolExecutor | None = None
_compare_pool_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _compare_pool
    with _compare_pool_lock:
        if _compare_pool is None:
            _compare_pool = ThreadPoolExecutor(COMPARE_THREADS, thread_name_prefix="executor-compare")
        return _compare_pool


def outputs_match(
    got: np.ndarray, expected: np.ndarray, mode: str, atol: float, rtol: float, floating: bool
) -> bool:
    """Whether every element passes the rule of :func:`compare_output`, decided block by block.

    The same element test in the same float64 arithmetic as the full comparison (``|got-ref| <=
    atol + rtol*|ref|``, NaN never passing), only without whole-array temporaries; it says nothing
    about *which* elements fail, which the full comparison works out when this returns False. Large
    outputs are split into :data:`COMPARE_THREADS` ranges checked in parallel; the first failing
    range stops the others.
    """
    if got.shape != expected.shape:
        return False
    a, b = got.reshape(-1), expected.reshape(-1)
    if mode == "sorted":
        a, b = np.sort(a), np.sort(b)
    n = a.size
    if n == 0:
        return True
    tolerance = floating and mode != "exact"
    if n < PARALLEL_MIN or COMPARE_THREADS == 1:
        return _range_matches(a, b, 0, n, tolerance, atol, rtol, None)
    failed = threading.Event()
    step = -(-n // COMPARE_THREADS)
    step = -(-step // COMPARE_BLOCK) * COMPARE_BLOCK  # whole blocks per range
    ranges = [(start, min(n, start + step)) for start in range(0, n, step)]
    futures = [
        _pool().submit(_range_matches, a, b, lo, hi, tolerance, atol, rtol, failed) for lo, hi in ranges
    ]
    return all(f.result() for f in futures)


def _range_matches(
    a: np.ndarray,
    b: np.ndarray,
    lo: int,
    hi: int,
    tolerance: bool,
    atol: float,
    rtol: float,
    failed: threading.Event | None,
) -> bool:
    """The test of :func:`outputs_match` over elements ``[lo, hi)``; sets ``failed`` on a failure and
    gives up (returning True, which does not count) once another range has set it."""
    block = min(hi - lo, COMPARE_BLOCK)
    if tolerance:
        x_buf, y_buf, t_buf = np.empty(block), np.empty(block), np.empty(block)
    for start in range(lo, hi, block):
        if failed is not None and failed.is_set():
            return True
        stop = min(hi, start + block)
        if not tolerance:
            # NaN != NaN, so a NaN in ``got`` fails here as in the full comparison.
            if not bool(np.equal(a[start:stop], b[start:stop]).all()):
                if failed is not None:
                    failed.set()
                return False
            continue
        m = stop - start
        x, y, t = x_buf[:m], y_buf[:m], t_buf[:m]
        x[...] = a[start:stop]
        y[...] = b[start:stop]
        with np.errstate(invalid="ignore", over="ignore"):
            np.abs(y, out=t)
            t *= rtol
            t += atol
            np.subtract(x, y, out=x)
            np.abs(x, out=x)
            # NaN anywhere makes the difference NaN, and NaN <= t is False: it never passes.
            if not bool(np.less_equal(x, t).all()):
                if failed is not None:
                    failed.set()
                return False
    return True


def same_bits(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bits element by element (NaN payloads
    and -0.0 count), by :func:`outputs_match`'s exact rule on unsigned-integer views: block by block
    and, from :data:`PARALLEL_MIN` elements, by several threads. Two C-contiguous or two
    F-contiguous arrays are compared in place (no temporary the size of the array); any other pair
    (a strided view, or C against F order) is first copied into C order, one temporary per such
    array. Meant for a function task's ``in`` arrays, checked after every call and on every rotated
    copy after the trials (hundreds of MB under the GPU lock; ``np.array_equal`` makes a boolean
    array as long as the input and reads it with one thread):
    :meth:`executor.worker.host.FunctionRuntime.check_inputs`."""
    if before.dtype != after.dtype or before.shape != after.shape:
        return False
    size = before.itemsize
    bits = np.dtype(f"u{size}") if size in (1, 2, 4, 8) else np.dtype(np.uint8)
    order: Literal["C", "F"] = "F" if before.flags.f_contiguous and after.flags.f_contiguous else "C"
    a = np.ravel(before, order=order).view(bits)  # a view when the array is contiguous in ``order``
    b = np.ravel(after, order=order).view(bits)
    return outputs_match(a, b, "exact", 0.0, 0.0, False)


def passing_elements(
    got: np.ndarray, expected: np.ndarray, mode: str, atol: float, rtol: float, floating: bool
) -> np.ndarray:
    """Which elements pass (same shapes; ``sorted`` outputs already sorted): floats under a tolerance
    rule when ``|got-ref| <= atol + rtol*|ref|`` in float64, NaN never; everything else when equal.
    The rule that :func:`outputs_match` and the device comparison (:mod:`executor.devcompare`) decide
    without naming the failing elements."""
    ok: np.ndarray
    if floating and mode != "exact":
        with np.errstate(invalid="ignore", over="ignore"):
            a64, b64 = got.astype(np.float64), expected.astype(np.float64)
            ok = np.abs(a64 - b64) <= atol + rtol * np.abs(b64)
    else:
        ok = np.equal(got, expected)
    if floating:
        ok &= ~np.isnan(got)
    return ok


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
    if outputs_match(got, expected, rule.mode, rule.atol or 0.0, rule.rtol or 0.0, is_float(arg.dtype)):
        return None
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
    ok = passing_elements(a, b, rule.mode, rule.atol or 0.0, rule.rtol or 0.0, is_float(arg.dtype))
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


class TrialSamples(list[float]):
    """The trials' milliseconds in trial order (trial ``i`` on input set ``i % groups``), as
    :func:`measure_batched` returns them, and the trial from which :func:`timing_stats` takes its
    figures: ``median_from`` is ``groups`` when the trials stopped with the repeat visits deciding the
    noise (``TrialPolicy.repeat_pairs``: :func:`repeats_decide`), else 0. The list itself stays whole:
    its first visits are what the repeat-visit rule compares the median with."""

    median_from: int = 0


# Trials whose times a TimingStats keeps in order (TimingStats.samples_ms): enough for the stop rule's
# usual 5-30 trials whole and the start of a longer run, at most ~500 bytes of a verdict.
TRACE_TRIALS = 40


def trial_trace(samples_ms: list[float]) -> list[float]:
    """The first :data:`TRACE_TRIALS` of ``samples_ms`` in trial order, to 4 significant digits."""
    return [float(f"{x:.4g}") for x in list(samples_ms)[:TRACE_TRIALS]]


def timing_stats(
    samples_ms: list[float],
    stop: StopReason | None = None,
    warmup_calls: int | None = None,
    *,
    sets: int | None = None,
    slots: int | None = None,
) -> TimingStats:
    """Median, spread (IQR) and coefficients of variation of timing samples; for
    :class:`TrialSamples` stopped by the repeat visits, of those from ``median_from`` on (``trials``
    still counts them all). A set's first visit may honestly be slower than its repeats; at 10 trials
    over 3 sets, two slow stray repeats put a first visit at the median and move it by half the
    first visits' lead (review 23a: +1.9 % of bias, twice the 95th-percentile error of every-pair
    stops). The floor, the repeat-visit rule and the clock check judge this median.

    The first :data:`TRACE_TRIALS` samples are kept as they came (:func:`trial_trace`) with the
    rotation they ran in (``sets`` timing sets, ``slots`` rotated copies), so that a record shows
    where the spread that the stop rule saw comes from (``bench.probes.trial_trace``)."""
    skip = getattr(samples_ms, "median_from", 0)
    kept = list(samples_ms)[skip:] if 0 < skip < len(samples_ms) else samples_ms
    arr = np.asarray(kept, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    mean = float(arr.mean())
    return TimingStats(
        trials=len(samples_ms),
        median_ms=float(med),
        mean_ms=mean,
        min_ms=float(arr.min()),
        max_ms=float(arr.max()),
        iqr_ms=float(q3 - q1),
        cov=float(arr.std() / mean) if mean > 0 else 0.0,
        robust_cov=robust_cov(kept),
        stop=stop,
        warmup_calls=warmup_calls,
        samples_ms=trial_trace(samples_ms),
        sets=sets,
        slots=slots,
        median_from=skip or None,
    )


# Warm-up windows compared by the settle rule hold at least this many trials.
SETTLE_MIN_WINDOW = 3


def stop_rule(samples_ms: list[float], policy: TrialPolicy) -> StopReason | None:
    """Whether timing stops after exactly these samples (the wall-clock cap aside).

    It stops at ``max_trials``; otherwise, once there are ``min_trials`` samples and ``min_total_ms``
    of timed work, as soon as the median is known well enough: its relative standard error,
    estimated robustly as ``1.2533 * robust_cov / sqrt(n)`` (the spread within the sets when the
    trials rotate over ``policy.groups`` input sets, over their repeat visits once those hold
    ``policy.repeat_pairs`` pairs: :func:`within_set_cov`), is at most ``target_error`` (with
    ``target_error <= 0``: at once, the fixed rule).
    """
    n = len(samples_ms)
    if n >= policy.max_trials:
        return "max_trials"
    if n < policy.min_trials or sum(samples_ms) < policy.min_total_ms:
        return None
    if policy.target_error <= 0:
        return "min_time"
    if median_error(samples_ms, policy.groups, policy.repeat_pairs) <= policy.target_error:
        return "stable"
    return None


def settle_window(policy: TrialPolicy, trial_wall_ms: float) -> int:
    """Trials per window of the settle rule: about half of ``warmup_ms`` of trials, at least
    :data:`SETTLE_MIN_WINDOW`."""
    if trial_wall_ms <= 0:
        return SETTLE_MIN_WINDOW
    return max(SETTLE_MIN_WINDOW, math.ceil(policy.warmup_ms / 2 / trial_wall_ms))


def settled(warm_ms: list[float], window: int, tolerance: float) -> bool:
    """Whether the median of the last ``window`` warm-up times is within ``tolerance`` (relative) of
    the median of the ``window`` before: the clocks have stopped moving."""
    if tolerance <= 0:
        return True
    if len(warm_ms) < 2 * window:
        return False
    last = float(np.median(warm_ms[-window:]))
    before = float(np.median(warm_ms[-2 * window : -window]))
    return before > 0 and abs(last - before) <= tolerance * before


def warm_up_done(policy: TrialPolicy, warm_ms: list[float], wall_ms: float) -> bool:
    """The warm-up rule: at least ``warmup`` untimed calls and ``warmup_ms`` of wall time; with a
    ``settle`` tolerance also until :func:`settled` says the times have stopped moving, for at most
    ``max_warmup_ms`` of wall time."""
    n = len(warm_ms)
    if n < policy.warmup or wall_ms < policy.warmup_ms:
        return False
    if policy.settle <= 0 or wall_ms >= policy.max_warmup_ms:
        return True
    return settled(warm_ms, settle_window(policy, wall_ms / max(n, 1)), policy.settle)


def measure(trial: Callable[[int], float], policy: TrialPolicy) -> tuple[TrialSamples, StopReason]:
    """Run ``trial(i)`` (which returns the milliseconds of its timed region) one call at a time: warm-up
    calls (``i = -1, -2, ...``) until :func:`warm_up_done`, then trials until :func:`stop_rule` says
    stop. A candidate whose times keep scattering runs on until ``max_trials`` or until the trials
    have taken ``max_wall_s`` of wall time, whichever comes first.
    """
    return measure_batched(lambda indices: [trial(i) for i in indices], policy, max_batch=1)


def next_batch_size(
    samples_ms: list[float],
    policy: TrialPolicy,
    *,
    max_batch: int,
    trial_wall_s: float,
    elapsed_s: float,
    hint_ms: list[float],
) -> int:
    """How many trials to enqueue next: enough to reach ``min_trials``, ``min_total_ms`` and the
    number of trials that the current spread says the ``target_error`` needs, but never more than
    ``max_batch``, than the trials left to ``max_trials``, or (after ``min_trials``) than fit in
    what is left of ``max_wall_s``. ``hint_ms`` (the warm-up's times) stands in for the spread and
    the trial time before the first sample. At least 1.
    """
    if max_batch <= 1:
        return 1
    n = len(samples_ms)
    basis = samples_ms if n >= policy.min_trials or not hint_ms else hint_ms
    want = max(policy.min_trials - n, 1)
    if basis:
        median = float(np.median(basis))
        if median > 0 and policy.min_total_ms > 0:
            want = max(want, math.ceil((policy.min_total_ms - sum(samples_ms)) / median))
        if policy.target_error > 0 and len(basis) >= SETTLE_MIN_WINDOW:
            spread = (
                within_set_cov(basis, policy.groups, policy.repeat_pairs)
                if basis is samples_ms
                else robust_cov(basis)
            )
            needed = (1.2533 * spread / policy.target_error) ** 2
            want = max(want, math.ceil(needed) - n)
    want = min(want, max_batch, policy.max_trials - n)
    if n >= policy.min_trials and trial_wall_s > 0 and math.isfinite(policy.max_wall_s):
        want = min(want, math.ceil(max(policy.max_wall_s - elapsed_s, 0.0) / trial_wall_s))
    return max(want, 1)


def measure_batched(
    run_batch: Callable[[list[int]], list[float]],
    policy: TrialPolicy,
    max_batch: int,
    warmup: dict[str, Any] | None = None,
) -> tuple[TrialSamples, StopReason]:
    """Warm up and time in batches: ``run_batch(indices)`` runs one trial per index (negative: warm-up)
    and returns each trial's milliseconds; a device runtime enqueues them all and waits once.

    The rules are those of one call at a time: warm-up until :func:`warm_up_done` (checked between
    batches), then trials until :func:`stop_rule`, applied to every prefix of the samples so that the
    samples kept are exactly those after which one-at-a-time timing would have stopped (the rest of
    that batch is discarded), or until ``max_wall_s`` has passed at the end of a batch (``time_cap``).
    ``warmup``, when given, receives the warm-up's ``calls``, wall ``seconds`` and ``batches`` (trials and
    wall milliseconds of each).
    """
    max_batch = max(1, max_batch)
    warm_ms: list[float] = []
    batches: list[tuple[int, float]] = []  # (trials, wall ms) of each warm-up batch
    warm_start = time.perf_counter()
    limit = 10 * max(policy.max_trials, 1)  # a stuck clock must not spin forever
    while len(warm_ms) < limit:
        wall_ms = (time.perf_counter() - warm_start) * 1000.0
        if warm_up_done(policy, warm_ms, wall_ms):
            break
        n = len(warm_ms)
        size = max(policy.warmup - n, 1)
        if n:
            per_trial_ms = wall_ms / n
            # Enough trials for the missing warm-up time (or half a settle window) per batch; the
            # average so far counts the slow first call, so this errs on the short side.
            missing_ms = max(policy.warmup_ms - wall_ms, 0.0)
            size = max(size, math.ceil(missing_ms / per_trial_ms) if per_trial_ms > 0 else 1)
            if policy.settle > 0 and missing_ms <= 0:
                size = max(size, settle_window(policy, per_trial_ms) // 2)
        size = min(size, max_batch, limit - n)
        began = time.perf_counter()
        warm_ms.extend(run_batch([-1 - n - k for k in range(size)]))
        batches.append((size, (time.perf_counter() - began) * 1000.0))
    warm_wall_s = time.perf_counter() - warm_start
    if warmup is not None:
        warmup.update(calls=len(warm_ms), seconds=warm_wall_s, batches=batches)
    trial_wall_s = warm_wall_s / len(warm_ms) if warm_ms else 0.0
    samples = TrialSamples()
    start = time.perf_counter()
    while True:
        elapsed = time.perf_counter() - start
        size = next_batch_size(
            samples,
            policy,
            max_batch=max_batch,
            trial_wall_s=trial_wall_s,
            elapsed_s=elapsed,
            hint_ms=warm_ms,
        )
        began = time.perf_counter()
        times = run_batch(list(range(len(samples), len(samples) + size)))
        trial_wall_s = (time.perf_counter() - began) / max(len(times), 1)
        for value in times:
            samples.append(value)
            reason = stop_rule(samples, policy)
            if reason is not None:
                return _median_from(samples, policy), reason
        if len(samples) >= policy.min_trials and time.perf_counter() - start >= policy.max_wall_s:
            return _median_from(samples, policy), "time_cap"


def _median_from(samples: TrialSamples, policy: TrialPolicy) -> TrialSamples:
    """``samples``, marked to be summed up over the repeat visits if these decided the noise."""
    if repeats_decide(len(samples), policy.groups, policy.repeat_pairs):
        samples.median_from = policy.groups
    return samples


def prime() -> None:
    """Run the statistics of the warm-up and stopping rules once on made-up numbers.

    Their first use in a process is slow: ``np.median`` imports ``numpy.ma`` the first time it is
    called (12-16 ms here, and about 58 ms in a fresh process on the lent H100 under gVisor, where a
    kernel's whole warm-up then took 0.085-0.11 s instead of 0.03 s). A worker primes them while it
    starts, so that a candidate's warm-up does not pay for the import.
    """
    samples = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95]
    settled(samples, SETTLE_MIN_WINDOW, 0.02)
    median_error(samples)
    timing_stats(samples)


def within_set_cov(samples_ms: list[float], groups: int, repeat_pairs: int = 0) -> float:
    """The timing noise of samples taken in rotation over ``groups`` input sets (sample ``i`` on set
    ``i % groups``): 1.4826 * the median of the relative differences between two samples of one set,
    over sqrt(2). Two samples of one set differ by noise alone, so a set that honestly runs slower than
    another (other values, another branch taken) does not count as spread; for normal noise this is an
    unbiased estimate of the CoV (:func:`robust_cov` on one set), and a stray sample spoils only the
    pairs it is in. With one group, or no set holding two samples yet: :func:`robust_cov`.

    Once the repeat visits (sample ``groups`` on: each set's second visit and later) hold at least
    ``repeat_pairs`` pairs (> 0), only those pairs count. A set's first visit may honestly be slower
    than its repeats (its data come from memory where a repeat's may come from a cache; the
    repeat-visit rule allows for that), and while the sets hold two or three samples most pairs
    contain a first visit: a 10-30 % slower first visit then reads as 10-30 % of noise and kept
    honest function candidates timing to 20 trials and more (session 23, ``bench.probes.stop_rule_sim``).
    Which pairs count depends on the number of samples alone, never on their values (session 21's
    rule that took the smaller of two spreads let a candidate choose); the median is then reported
    over the repeat visits too (:class:`TrialSamples`), and the first visits stay the repeat-visit
    rule's reference (off by default: ``EvaluationOptions.repeat_pairs``)."""
    if groups <= 1:
        return robust_cov(samples_ms)
    arr = np.asarray(samples_ms, dtype=np.float64)
    if repeats_decide(arr.size, groups, repeat_pairs):
        repeats = _pair_differences(arr, groups, skip_first=True)
        if repeats:
            return float(1.4826 * np.median(np.concatenate(repeats)) / math.sqrt(2))
    diffs = _pair_differences(arr, groups, skip_first=False)
    if not diffs:
        return robust_cov(samples_ms)
    return float(1.4826 * np.median(np.concatenate(diffs)) / math.sqrt(2))


def repeats_decide(n: int, groups: int, repeat_pairs: int) -> bool:
    """Whether, after ``n`` samples rotated over ``groups`` sets, the repeat visits hold at least
    ``repeat_pairs`` pairs of one set's samples (``repeat_pairs`` 0 or one group: never); counted
    from ``n`` alone, never from the values."""
    if repeat_pairs <= 0 or groups <= 1:
        return False
    repeats = [max(len(range(g, n, groups)) - 1, 0) for g in range(groups)]
    return sum(r * (r - 1) // 2 for r in repeats) >= repeat_pairs


def _pair_differences(arr: np.ndarray, groups: int, skip_first: bool) -> list[np.ndarray]:
    """Per set (sample ``i`` on set ``i % groups``), the relative differences of every pair of its
    samples (``skip_first``: of its repeat visits, its first sample left out), over the median of
    those samples; sets with fewer than two give none."""
    diffs: list[np.ndarray] = []
    for g in range(groups):
        part = arr[g::groups]
        if skip_first:
            part = part[1:]
        med = float(np.median(part)) if part.size else 0.0
        if part.size >= 2 and med > 0:
            upper = np.triu_indices(part.size, 1)
            diffs.append(np.abs(part[:, None] - part[None, :])[upper] / med)
    return diffs


def median_error(samples_ms: list[float], groups: int = 1, repeat_pairs: int = 0) -> float:
    """Relative standard error of the median (normal approximation with a robust spread; for samples
    rotated over ``groups`` input sets, the spread within the sets: :func:`within_set_cov`)."""
    return 1.2533 * within_set_cov(samples_ms, groups, repeat_pairs) / float(np.sqrt(len(samples_ms)))
