"""The stop rule's noise over repeat visits (session 23, issue 33's cost) and the bit-for-bit check."""

from __future__ import annotations

import numpy as np
import pytest

from executor import checking
from executor.checking import measure, median_error, same_bits, stop_rule, within_set_cov
from executor.trialpolicy import TrialPolicy

# A host-timed function candidate: three timing sets, at least 7 trials, a 3 % target.
POLICY = TrialPolicy(warmup=1, min_trials=7, max_trials=100, min_total_ms=0.0, target_error=0.03, groups=3)
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
