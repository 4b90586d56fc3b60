"""The task's timing set: a seed fixed by the task's content, stored once, loaded as drawn, pruned."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from executor import timingset
from executor.evaluate import Evaluator
from executor.inputs import generate_inputs
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task

from .conftest import TASKS_DIR


def _changed_size(task: FunctionTask | KernelTask) -> FunctionTask | KernelTask:
    data = task.model_dump()
    data["params"]["n"]["timing"] += 1
    return type(task).model_validate(data)


def test_the_seed_is_fixed_by_the_task_and_changes_with_its_inputs(saxpy: FunctionTask | KernelTask) -> None:
    seed = timingset.timing_seed(saxpy)
    assert seed == timingset.timing_seed(load_task(TASKS_DIR / "saxpy"))  # the same task, loaded again
    assert 0 <= seed < 2**62
    assert seed != timingset.timing_seed(_changed_size(saxpy))
    assert seed != timingset.timing_seed(load_task(TASKS_DIR / "histogram"))


def test_the_seeds_come_from_a_secret_the_task_alone_does_not_give(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """Review 22: seeds drawn from the task alone let a candidate carry the timing sets' answers."""
    secret = timingset.timing_secret(tmp_path / "one")
    assert len(secret) == timingset.SECRET_BYTES and secret == timingset.timing_secret(tmp_path / "one")
    assert (tmp_path / "one" / timingset.SECRET_FILE).stat().st_mode & 0o777 == 0o600
    other = timingset.timing_secret(tmp_path / "two")
    assert other != secret
    seeds = {
        timingset.timing_seed(saxpy),
        timingset.timing_seed(saxpy, secret),
        timingset.timing_seed(saxpy, other),
    }
    assert len(seeds) == 3 and timingset.timing_seed(saxpy, secret) == timingset.timing_seed(saxpy, secret)
    library = Path("/cache/reference/aaaa.so")
    public = timingset.timing_set_spec(saxpy, library, tmp_path)
    kept = timingset.timing_set_spec(saxpy, library, tmp_path, secret=secret)
    assert kept.seed == timingset.timing_seed(saxpy, secret) and kept.dir != public.dir
    assert kept.dir != timingset.timing_set_spec(saxpy, library, tmp_path, secret=other).dir
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / timingset.SECRET_FILE).write_bytes(b"short")
    with pytest.raises(ValueError, match="not a timing secret"):
        timingset.timing_secret(tmp_path / "bad")


def test_an_evaluator_times_on_its_secret_seeds(saxpy: FunctionTask | KernelTask, tmp_path: Path) -> None:
    # no evaluation: no spare workers, which would be killed unused
    evaluator = Evaluator(
        ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", prewarm_workers=False)
    )
    try:
        spec = evaluator._timing_set(saxpy, Path("/cache/reference/aaaa.so"), EvaluationOptions())
        assert spec is not None and spec.seed != timingset.timing_seed(saxpy)
        assert spec.seed == timingset.timing_seed(saxpy, timingset.timing_secret(tmp_path / "cache"))
    finally:
        evaluator.close()


def test_the_directory_changes_with_the_reference_build(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    one = timingset.timing_set_spec(saxpy, Path("/cache/reference/aaaa.so"), tmp_path)
    assert one == timingset.timing_set_spec(saxpy, Path("/cache/reference/aaaa.so"), tmp_path)
    assert one.dir != timingset.timing_set_spec(saxpy, Path("/cache/reference/bbbb.so"), tmp_path).dir
    assert (
        one.dir
        != timingset.timing_set_spec(_changed_size(saxpy), Path("/cache/reference/aaaa.so"), tmp_path).dir
    )


def test_a_stored_set_loads_as_drawn_and_its_outputs_come_back(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    spec = timingset.timing_set_spec(saxpy, Path("ref.so"), tmp_path)
    assert timingset.load_inputs(spec, saxpy) is None and timingset.load_expected(spec, saxpy) is None
    drawn = generate_inputs(saxpy, "timing", spec.seed)
    expected = {"y": drawn.arrays["y"] * np.float32(2)}
    timingset.store(spec, saxpy, drawn, expected)
    loaded = timingset.load_inputs(spec, saxpy)
    assert loaded is not None and loaded.seed == spec.seed and loaded.size == "timing"
    assert loaded.scalars == drawn.scalars
    assert sorted(loaded.arrays) == sorted(drawn.arrays)
    for name, array in drawn.arrays.items():
        assert np.array_equal(loaded.arrays[name], array)
    again = timingset.load_expected(spec, saxpy)
    assert again is not None and np.array_equal(again["y"], expected["y"])
    # A second writer finds it stored and leaves it (and no debris) alone.
    timingset.store(spec, saxpy, drawn, {"y": np.zeros_like(expected["y"])})
    stored_again = timingset.load_expected(spec, saxpy)
    assert stored_again is not None and np.array_equal(stored_again["y"], expected["y"])
    assert [p.name for p in tmp_path.iterdir()] == [Path(spec.dir).name]


def test_a_damaged_set_is_not_used(saxpy: FunctionTask | KernelTask, tmp_path: Path) -> None:
    spec = timingset.timing_set_spec(saxpy, Path("ref.so"), tmp_path)
    drawn = generate_inputs(saxpy, "timing", spec.seed)
    timingset.store(spec, saxpy, drawn, {"y": drawn.arrays["y"]})
    np.save(Path(spec.dir) / "input-x.npy", np.zeros(10, dtype=np.float32))  # wrong length
    np.save(Path(spec.dir) / "expected-y.npy", drawn.arrays["y"].astype(np.float64))  # wrong type
    assert timingset.load_inputs(spec, saxpy) is None
    assert timingset.load_expected(spec, saxpy) is None


def _fake_set(root: Path, name: str, nbytes: int, used: float) -> None:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "input-x.npy").write_bytes(b"\0" * nbytes)
    (directory / timingset.MANIFEST).write_text("{}")
    os.utime(directory / timingset.MANIFEST, (used, used))


def test_pruning_removes_the_least_recently_used_but_never_the_kept(tmp_path: Path) -> None:
    now = time.time()
    _fake_set(tmp_path, "oldest", 1000, now - 300)
    _fake_set(tmp_path, "kept", 1000, now - 200)
    _fake_set(tmp_path, "older", 1000, now - 100)
    _fake_set(tmp_path, "newest", 1000, now)
    debris = tmp_path / ".unfinished-write"
    debris.mkdir()
    os.utime(debris, (now - 7200, now - 7200))
    removed = timingset.prune(tmp_path, limit_bytes=2100, keep={"kept"})
    assert removed == ["oldest", "older"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "newest"]
    assert timingset.prune(tmp_path, limit_bytes=10**9, keep=set()) == []


def test_poisoned_output_buffers_are_not_stored_but_come_back_poisoned(tmp_path: Path) -> None:
    task = load_task(TASKS_DIR / "block_sum")  # sums: an `out` array, all NaN before a run
    spec = timingset.timing_set_spec(task, Path("ref.so"), tmp_path)
    drawn = generate_inputs(task, "timing", spec.seed)
    timingset.store(spec, task, drawn, {"sums": np.ones_like(drawn.arrays["sums"])})
    assert not (Path(spec.dir) / "input-sums.npy").exists()
    loaded = timingset.load_inputs(spec, task)
    assert loaded is not None
    sums = loaded.arrays["sums"]
    assert sums.shape == drawn.arrays["sums"].shape and sums.dtype == drawn.arrays["sums"].dtype
    assert bool(np.isnan(sums).all())
    assert np.array_equal(loaded.arrays["values"], drawn.arrays["values"])


def test_a_set_past_the_limit_keeps_its_outputs_and_evicts_nothing(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    first = timingset.timing_set_spec(saxpy, Path("a.so"), tmp_path)
    drawn = generate_inputs(saxpy, "timing", first.seed)
    expected = {"y": drawn.arrays["y"] * np.float32(2)}
    set_bytes = sum(a.nbytes for a in drawn.arrays.values()) + expected["y"].nbytes
    limit = set_bytes + set_bytes // 2  # room for one whole set, not two
    timingset.store(first.model_copy(update={"limit_bytes": limit}), saxpy, drawn, expected)
    second = timingset.timing_set_spec(saxpy, Path("b.so"), tmp_path, limit_bytes=limit)
    timingset.store(second, saxpy, drawn, expected)
    assert timingset.inputs_stored(first) and timingset.load_inputs(first, saxpy) is not None
    # The second set does not fit whole: its inputs are drawn from the seed, its outputs are kept,
    # and the first set stays as it was.
    assert timingset.stored(second) and not timingset.inputs_stored(second)
    assert timingset.load_inputs(second, saxpy) is None
    outputs = timingset.load_expected(second, saxpy)
    assert outputs is not None and np.array_equal(outputs["y"], expected["y"])
    assert timingset.stored_bytes(tmp_path) <= limit
