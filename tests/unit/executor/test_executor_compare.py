"""`compare_output`: which element is reported, how many differ, and unwritten vs wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest

from executor.checking import COMPARE_BLOCK, COMPARE_THREADS, PARALLEL_MIN, compare_output, outputs_match
from executor.inputs import INT_POISON
from executor.taskformat import ArrayArg, load_task

from .conftest import TASKS_DIR


def test_integer_mismatch_reports_the_first_differing_element_and_the_count() -> None:
    task = load_task(TASKS_DIR / "histogram")
    arg = next(a for a in task.outputs if a.name == "bins")  # uint32, compared element by element
    assert isinstance(arg, ArrayArg)
    expected = np.arange(256, dtype=np.uint32)
    got = expected.copy()
    got[17] += 1
    got[200] -= np.uint32(3)
    found = compare_output(task, arg, got, expected, "test", seed=5)
    assert found is not None
    kind, mismatch = found
    assert kind.value == "wrong_output"
    assert (mismatch.index, mismatch.count, mismatch.total) == (17, 2, 256)
    assert mismatch.expected == "17" and mismatch.got == "18"
    assert compare_output(task, arg, expected.copy(), expected, "test", seed=5) is None


def test_integer_poison_left_in_place_is_reported_as_unwritten() -> None:
    task = load_task(TASKS_DIR / "histogram")
    arg = next(a for a in task.outputs if a.name == "bins")  # uint32, compared element by element
    assert isinstance(arg, ArrayArg)
    expected = np.arange(256, dtype=np.uint32)
    got = expected.copy()
    got[3] = INT_POISON[arg.dtype]
    found = compare_output(task, arg, got, expected, "test", seed=1)
    assert found is not None
    assert found[0].value == "unwritten_output" and found[1].index == 3 and found[1].count == 1


def test_float_nan_never_passes_and_tolerance_applies() -> None:
    task = load_task(TASKS_DIR / "saxpy")
    arg = task.outputs[0]
    assert isinstance(arg, ArrayArg)
    expected = np.linspace(-1, 1, 50, dtype=np.float32)
    close = expected + np.float32(1e-7)
    assert compare_output(task, arg, close, expected, "test", seed=2) is None
    got = expected.copy()
    got[9] = np.nan
    found = compare_output(task, arg, got, expected, "test", seed=2)
    assert found is not None and found[1].index == 9 and found[1].count == 1


def _full_rule(got: np.ndarray, expected: np.ndarray, mode: str, atol: float, rtol: float) -> bool:
    """The element rule written out on whole arrays, as the comparison states it."""
    a, b = (np.sort(got), np.sort(expected)) if mode == "sorted" else (got, expected)
    if np.issubdtype(got.dtype, np.floating) and mode != "exact":
        with np.errstate(invalid="ignore", over="ignore"):
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            ok = (np.abs(a64 - b64) <= atol + rtol * np.abs(b64)) & ~np.isnan(a)
    else:
        ok = a == b
        if np.issubdtype(got.dtype, np.floating):
            ok &= ~np.isnan(a)
    return bool(ok.all())


@pytest.mark.parametrize("mode", ["tolerance", "exact", "sorted"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_blockwise_float_check_agrees_with_the_whole_array_rule(mode: str, dtype: str) -> None:
    """Across block boundaries and at the tolerance's edge: NaN, inf, just inside and just outside."""
    rng = np.random.default_rng(11)
    n = 3 * COMPARE_BLOCK + 17
    atol, rtol = 2e-6, 1e-5
    expected = rng.uniform(-3, 3, n).astype(dtype)
    edge = (atol + rtol * np.abs(expected.astype(np.float64))).astype(dtype)
    cases = {"equal": expected.copy()}
    for where in (0, COMPARE_BLOCK - 1, COMPARE_BLOCK, n - 1):
        inside = expected.copy()
        inside[where] = expected[where] + edge[where] * dtype_fraction(dtype)
        outside = expected.copy()
        outside[where] = expected[where] + 4 * edge[where]
        nan, inf = expected.copy(), expected.copy()
        nan[where], inf[where] = np.nan, np.inf
        cases |= {
            f"inside{where}": inside,
            f"outside{where}": outside,
            f"nan{where}": nan,
            f"inf{where}": inf,
        }
    shuffled = expected.copy()
    rng.shuffle(shuffled)
    cases["shuffled"] = shuffled
    if mode == "tolerance":  # the edge cases are on the intended sides of the edge
        assert _full_rule(cases["inside0"], expected, mode, atol, rtol)
        assert not _full_rule(cases["outside0"], expected, mode, atol, rtol)
    for name, got in cases.items():
        assert outputs_match(got, expected, mode, atol, rtol, floating=True) == _full_rule(
            got, expected, mode, atol, rtol
        ), name
    assert outputs_match(expected, expected, mode, atol, rtol, floating=True)
    assert not outputs_match(cases["nan0"], expected, mode, atol, rtol, floating=True)


def dtype_fraction(dtype: str) -> float:
    """How far into the tolerance an 'inside' perturbation goes (float32 rounds coarsely)."""
    return 0.5 if dtype == "float32" else 0.9


@pytest.mark.parametrize("mode", ["tolerance", "exact", "sorted"])
def test_blockwise_integer_check_agrees_with_the_whole_array_rule(mode: str) -> None:
    rng = np.random.default_rng(5)
    n = 2 * COMPARE_BLOCK + 3
    expected = rng.integers(-1000, 1000, n, dtype=np.int32)
    shuffled = expected.copy()
    rng.shuffle(shuffled)
    off = expected.copy()
    off[COMPARE_BLOCK] += 1
    for got in (expected.copy(), shuffled, off, expected[:-1]):
        want = got.shape == expected.shape and _full_rule(got, expected, mode, 0.0, 0.0)
        assert outputs_match(got, expected, mode, 0.0, 0.0, floating=False) == want


def test_a_large_failing_output_is_still_reported_in_full() -> None:
    task = load_task(TASKS_DIR / "saxpy")
    arg = task.outputs[0]
    assert isinstance(arg, ArrayArg)
    expected = np.linspace(-1, 1, 2 * COMPARE_BLOCK + 5, dtype=np.float32)
    got = expected.copy()
    got[COMPARE_BLOCK + 1] = 7.0
    got[-1] = np.nan
    found = compare_output(task, arg, got, expected, "timing", seed=3)
    assert found is not None
    kind, mismatch = found
    assert kind.value == "unwritten_output" and mismatch.count == 2 and mismatch.index == COMPARE_BLOCK + 1


@pytest.mark.parametrize("floating", [True, False])
def test_large_outputs_are_checked_in_parallel_ranges_without_missing_an_element(floating: bool) -> None:
    """Above PARALLEL_MIN the check is split into ranges on threads: one bad element in any range
    (first, last, on a range boundary) still fails it, and a matching output still passes."""
    assert COMPARE_THREADS >= 1
    n = 2 * PARALLEL_MIN + 3 * COMPARE_BLOCK + 7
    rng = np.random.default_rng(17)
    expected: np.ndarray
    if floating:
        expected = rng.uniform(-3, 3, n).astype(np.float32)
        bad_value: float = np.nan
    else:
        expected = rng.integers(-1000, 1000, n, dtype=np.int32)
        bad_value = 1001
    per_thread = math.ceil(n / COMPARE_THREADS)
    step = math.ceil(per_thread / COMPARE_BLOCK) * COMPARE_BLOCK  # the range length used
    positions = {0, n - 1, n // 2, min(step, n - 1), min(step - 1, n - 1)}
    assert outputs_match(expected.copy(), expected, "tolerance", 2e-6, 1e-5, floating)
    for where in sorted(positions):
        got = expected.copy()
        got[where] = bad_value
        assert not outputs_match(got, expected, "tolerance", 2e-6, 1e-5, floating), where
        assert outputs_match(got, expected, "tolerance", 2e-6, 1e-5, floating) == _full_rule(
            got, expected, "tolerance", 2e-6, 1e-5
        )
