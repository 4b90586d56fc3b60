"""`compare_output`: which element is reported, how many differ, and unwritten vs wrong."""

from __future__ import annotations

import numpy as np

from executor.checking import compare_output
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
