"""The naive baselines' timings kept on disk per device model (executor.basetiming)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from executor.basetiming import BASELINE_WORKER, TIMING_FIELDS, TIMING_METHOD, BaselineTimings, baseline_key
from executor.cache import content_key
from executor.checking import timing_stats
from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import TimingStats
from executor.worker.runner import CANDIDATE_PROCESS_ENV

H200 = "NVIDIA H200 (sm_90)"


def _stats(median_ms: float) -> TimingStats:
    return timing_stats([median_ms] * 7)


def test_a_stored_timing_is_read_back_for_the_same_device_model_only(tmp_path: Path) -> None:
    store = BaselineTimings(tmp_path, max_age_s=3600)
    store.save(H200, "k1", _stats(2.5))
    again = BaselineTimings(tmp_path, max_age_s=3600)  # another executor of the host
    got = again.load(H200, "k1")
    assert got is not None and got.median_ms == 2.5 and got.trials == 7
    assert again.load("NVIDIA H100 80GB HBM3 (sm_90)", "k1") is None
    assert again.load(H200, "k2") is None


def test_a_stale_or_future_timing_is_not_used(tmp_path: Path) -> None:
    store = BaselineTimings(tmp_path, max_age_s=100)
    now = time.time()
    store.save(H200, "old", _stats(1.0), now=now - 101)
    store.save(H200, "fresh", _stats(1.0), now=now - 99)
    store.save(H200, "ahead", _stats(1.0), now=now + 60)  # a clock set back since: not trusted
    assert store.load(H200, "old", now=now) is None
    assert store.load(H200, "fresh", now=now) is not None
    assert store.load(H200, "ahead", now=now) is None
    store.save(H200, "old", _stats(3.0), now=now)  # timed again: replaces it
    replaced = store.load(H200, "old", now=now)
    assert replaced is not None and replaced.median_ms == 3.0


def test_only_a_baseline_workers_timing_is_read(tmp_path: Path) -> None:
    store = BaselineTimings(tmp_path, max_age_s=3600)
    store.save(H200, "k", _stats(1.0), seconds={"baseline_timing": 0.4})
    (path,) = tmp_path.rglob("k.json")
    entry = json.loads(path.read_text())
    assert entry["source"] == BASELINE_WORKER and entry["seconds"] == {"baseline_timing": 0.4}
    assert store.load(H200, "k") is not None
    # timed in a candidate's process (what the store held before the baseline had a worker of its own)
    for planted in ({**entry, "source": "candidate"}, {k: v for k, v in entry.items() if k != "source"}):
        path.write_text(json.dumps(planted))
        assert store.load(H200, "k") is None


def test_an_unreadable_file_counts_as_absent(tmp_path: Path) -> None:
    store = BaselineTimings(tmp_path, max_age_s=3600)
    store.save(H200, "k", _stats(1.0))
    (path,) = tmp_path.rglob("k.json")
    path.write_text('{"measured_at": "soon", "timing": {}}')
    assert store.load(H200, "k") is None
    path.write_text("not json")
    assert store.load(H200, "k") is None


def test_the_key_follows_what_the_timing_depends_on(saxpy: FunctionTask | KernelTask) -> None:
    options = EvaluationOptions()
    key = baseline_key(saxpy, options)
    # the candidate's own limits and checks do not change the baseline's timing
    assert baseline_key(saxpy, options.model_copy(update={"parent_ms": 3.0, "correctness_sets": 5})) == key
    # its source, the task's arguments and the timing options do
    assert baseline_key(saxpy.model_copy(update={"naive_source": "// other"}), options) != key
    assert baseline_key(saxpy, options.model_copy(update={"timing_sets": 4})) != key
    assert baseline_key(saxpy, options.model_copy(update={"host_target_error": 0.01})) != key
    # a kernel's trials held until enqueued time differently (session 26): not a baseline timed without
    assert baseline_key(saxpy, options.model_copy(update={"launch_gate": not options.launch_gate})) != key
    assert baseline_key(saxpy.model_copy(update={"id": "saxpy_other"}), options) != key
    # page-locked copies run faster (session 28's option), and the default's keys are those stored before it
    locked = options.model_copy(update={"host_memory": "page_locked"})
    assert baseline_key(saxpy, locked) != key
    # one left pageable past the cap has a key of its own, the cap's (review 44 F3); pageable asked: none
    assert len({key, baseline_key(saxpy, locked), *(baseline_key(saxpy, locked, c) for c in (1, 2))}) == 4
    assert baseline_key(saxpy, options, over_cap=1) == key
    assert key == content_key(
        TIMING_METHOD,
        saxpy.id,
        saxpy.naive_source or "",
        saxpy.model_dump_json(include={"params", "args"}),
        options.model_dump_json(include=TIMING_FIELDS),
    )


def test_a_function_baseline_timed_in_its_own_process_has_a_key_of_its_own(
    saxpy: FunctionTask | KernelTask, scale_kernel: FunctionTask | KernelTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 38 L3: a runner's medians are higher, so executors of one cache that run function
    candidates (and their baselines) in different places must not read each other's baselines."""
    options = EvaluationOptions()
    monkeypatch.setenv(CANDIDATE_PROCESS_ENV, "0")
    in_worker = {baseline_key(task, options) for task in (saxpy, scale_kernel)}
    monkeypatch.setenv(CANDIDATE_PROCESS_ENV, "1")
    in_runner = {baseline_key(task, options) for task in (saxpy, scale_kernel)}
    assert isinstance(saxpy, FunctionTask) and isinstance(scale_kernel, KernelTask)
    assert baseline_key(saxpy, options) not in in_worker  # the function task's moved
    assert baseline_key(scale_kernel, options) in in_worker  # a kernel's never runs in a runner
    assert len(in_runner - in_worker) == 1


def test_the_baselines_are_shared_and_read_at_the_turn_by_default() -> None:
    from executor.settings import ExecutorSettings

    settings = ExecutorSettings()
    assert settings.baseline_timing_cache and settings.timings_at_turn
    assert settings.baseline_timing_max_age_s == 24 * 3600
