"""The stop rule's noise over repeat visits (session 23, issue 33's cost) and the bit-for-bit check."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from executor import checking
from executor.checking import (
    measure,
    measure_batched,
    median_error,
    repeats_decide,
    same_bits,
    stop_rule,
    timing_stats,
    within_set_cov,
)
from executor.protocol import EvaluationOptions
from executor.trialpolicy import TrialPolicy

# A host-timed function candidate: three timing sets, at least 7 trials, a 3 % target.
POLICY = TrialPolicy(
    warmup=1, min_trials=7, max_trials=100, min_total_ms=0.0, target_error=0.03, groups=3, repeat_pairs=5
)
EVERY_PAIR = TrialPolicy(**{**POLICY.__dict__, "repeat_pairs": 0})


def _first_slow(i: int, noise: np.random.Generator) -> float:
    """30 ms with 1 % noise; each set's first visit (trials 0-2) 25 % slower, as honest code whose
    first visit reads its set from memory and whose repeats find it in a cache."""
    return 30.0 * (1.0 + 0.01 * float(noise.standard_normal())) * (1.25 if i < 3 else 1.0)


def test_slow_first_visits_are_not_read_as_noise_once_the_repeats_hold_enough_pairs() -> None:
    noise = np.random.default_rng(0)
    samples, stop = measure(lambda i: _first_slow(i, noise), POLICY)
    # 10 trials: the repeats (trials 3-9, sets of 3, 2 and 2) hold 3 + 1 + 1 = 5 pairs.
    assert (len(samples), stop) == (10, "stable")
    # Every pair counted, the first visits read as some 20 % of noise: the rule runs on much longer.
    noise = np.random.default_rng(0)
    samples, stop = measure(lambda i: _first_slow(i, noise), EVERY_PAIR)
    assert len(samples) >= 13


def test_which_pairs_count_depends_on_the_number_of_samples_alone() -> None:
    noise = np.random.default_rng(1)
    samples = [_first_slow(i, noise) for i in range(10)]
    repeats = within_set_cov(samples, 3, repeat_pairs=5)
    assert repeats < 0.03
    # One pair short (9 samples: 1 + 1 + 1 repeat pairs), every pair counts, first visits included.
    assert within_set_cov(samples[:9], 3, repeat_pairs=5) == within_set_cov(samples[:9], 3)
    assert within_set_cov(samples[:9], 3) > 0.1
    # Repeats that really scatter count in full, even where the first visits would have made the
    # spread look smaller: the rule does not take the smaller of two spreads.
    scattered = [30.0, 30.0, 30.0] + [30.0 * (1.0 + 0.2 * ((-1) ** k)) for k in range(7)]
    assert within_set_cov(scattered, 3, repeat_pairs=5) > within_set_cov(scattered, 3)
    assert stop_rule(scattered, POLICY) is None


def test_first_visits_far_from_the_repeats_hold_the_stop_until_the_repeats_have_their_pairs() -> None:
    # First visits a candidate made fast: while every pair counts they read as noise, and the rule
    # stops once the repeats alone hold 5 pairs, on a median that is a repeat visit.
    samples, stop = measure(lambda i: 1.0 if i < 3 else 30.0, POLICY)
    assert (len(samples), stop) == (10, "stable")
    assert float(np.median(samples)) == 30.0
    assert stop_rule([1.0, 1.0, 1.0, 30.0, 30.0, 30.0, 30.0], POLICY) is None


def test_median_error_passes_the_pairs_rule_on() -> None:
    noise = np.random.default_rng(2)
    samples = [_first_slow(i, noise) for i in range(12)]
    assert median_error(samples, 3, 5) < median_error(samples, 3) / 3


def _outliers(seed: int) -> Callable[[int], float]:
    """30 ms with 2 % noise, first visits 30 % slower, one call in ten 50 % slower (review 23a's cell)."""
    rng = np.random.default_rng(seed)

    def trial(i: int) -> float:
        if i < 0:
            return 30.0
        ms = 30.0 * (1.0 + 0.02 * float(rng.standard_normal())) * (1.3 if i < 3 else 1.0)
        return ms * 1.5 if rng.random() < 0.1 else ms

    return trial


# Function tasks' trials as the options build them (3 timing sets), without the wall-clock cap.
DEFAULTS = dataclasses.replace(EvaluationOptions().trial_policy(), groups=3, max_wall_s=float("inf"))
# What main's code (before the option) gave for _outliers(seed): trials, stop, median and IQR.
MAIN = {
    0: (19, "stable", 29.922879202233577, 5.0779959428776955),
    1: (16, "stable", 30.010969326550242, 3.1942606223449843),
    2: (16, "stable", 30.416024282225603, 3.0668126992280875),
    3: (13, "stable", 30.135471967936752, 0.7434276726666695),
}


def test_the_pairs_rule_is_on_by_default_and_off_times_as_before_it() -> None:
    # 5 by default since session 26 (the H200 A/B: docs/executor.md); 0 turns it off.
    assert EvaluationOptions().trial_policy().repeat_pairs == 5
    assert EvaluationOptions(repeat_pairs=0).trial_policy(device_timed=True).repeat_pairs == 0
    off = dataclasses.replace(DEFAULTS, repeat_pairs=0)
    for seed, (trials, stop, median, iqr) in MAIN.items():
        samples, reason = measure(_outliers(seed), off)
        stats = timing_stats(samples, reason)
        assert (stats.trials, stats.stop, stats.median_ms, stats.iqr_ms) == (trials, stop, median, iqr)
        trial = _outliers(seed)
        samples, reason = measure_batched(lambda idx, t=trial: [t(i) for i in idx], off, 8)
        assert timing_stats(samples, reason).median_ms == median


def test_with_the_pairs_rule_on_the_median_is_over_the_repeat_visits_from_the_switch_on() -> None:
    on = dataclasses.replace(DEFAULTS, repeat_pairs=5)
    assert not repeats_decide(9, 3, 5) and repeats_decide(10, 3, 5) and not repeats_decide(99, 3, 0)
    samples, reason = measure(_outliers(5), on)
    stats = timing_stats(samples, reason)
    assert (len(samples), reason, stats.trials) == (10, "stable", 10)
    # Two slow strays among the 7 repeats put a slow first visit at the median of all 10 trials.
    assert float(np.median(samples)) > 34.0
    assert stats.median_ms == float(np.median(samples[3:])) < 30.5
    assert stats.iqr_ms == float(np.subtract(*np.percentile(samples[3:], [75, 25])))
    assert len(samples[:3]) == 3 and min(samples[:3]) > 36.0  # the first visits stay in the samples
    # Stopped before the repeats hold their pairs (here by max_trials at 9): every trial counts.
    early = dataclasses.replace(on, min_trials=7, max_trials=9)
    samples, reason = measure(_outliers(5), early)
    assert (len(samples), reason) == (9, "max_trials")
    assert timing_stats(samples, reason).median_ms == float(np.median(samples))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64])
def test_same_bits_is_bit_for_bit(dtype: type[np.generic]) -> None:
    rng = np.random.default_rng(3)
    a = (rng.random(5000) * 100).astype(dtype)
    assert same_bits(a, a.copy())
    b = a.copy()
    b[4999] = b[4999] + 1
    assert not same_bits(a, b)
    assert not same_bits(a, a[:-1].copy())
    assert not same_bits(a, a.astype(np.complex128))


def test_same_bits_tells_nan_payloads_and_signed_zeros_apart() -> None:
    a = np.array([0.0, 1.0, np.nan], dtype=np.float32)
    b = a.copy()
    b[0] = -0.0
    assert not same_bits(a, b)
    c = a.copy()
    c.view(np.uint32)[2] ^= 1  # another NaN
    assert np.isnan(c[2]) and not same_bits(a, c)
    assert same_bits(a, a.copy())  # NaN equals itself bit for bit


def test_same_bits_checks_every_range_of_a_large_array(monkeypatch: pytest.MonkeyPatch) -> None:
    # Several threads, each over its own range: a change in any range is found.
    monkeypatch.setattr(checking, "PARALLEL_MIN", 1 << 10)
    monkeypatch.setattr(checking, "COMPARE_THREADS", 3)
    monkeypatch.setattr(checking, "COMPARE_BLOCK", 1 << 8)
    a = np.arange(10_000, dtype=np.float32)
    assert same_bits(a, a.copy())
    for at in (0, 3_333, 6_700, 9_999):
        b = a.copy()
        b[at] = -1.0
        assert not same_bits(a, b), at


def test_same_bits_compares_shapes_and_layouts_element_by_element() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert not same_bits(a, a.reshape(4, 3))  # the same bytes in another shape (review 23a)
    assert not same_bits(a, a.reshape(-1))
    assert same_bits(a, np.asfortranarray(a))  # C against F order: the same elements
    f = np.asfortranarray(a)
    g = f.copy(order="F")
    assert same_bits(f, g)
    g[2, 1] = -0.0
    assert not same_bits(f, g)
    assert same_bits(a[:, ::2], a[:, ::2].copy()) and not same_bits(a[:, ::2], a[:, 1::2])
    assert same_bits(np.ones((), np.float64), np.ones((), np.float64))


def test_same_bits_reads_contiguous_arrays_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    compare = checking.outputs_match
    monkeypatch.setattr(
        checking, "outputs_match", lambda a, b, *rest: seen.append((a, b)) or compare(a, b, *rest)
    )
    c = np.arange(12, dtype=np.float64).reshape(3, 4)
    f = np.asfortranarray(c)
    for x, y in ((c, c.copy()), (f, f.copy(order="F"))):
        assert same_bits(x, y)
        a, b = seen.pop()
        assert np.shares_memory(a, x) and np.shares_memory(b, y)
    assert same_bits(c, f)  # C against F: one of them copied
    a, b = seen.pop()
    assert np.shares_memory(a, c) and not np.shares_memory(b, f)
