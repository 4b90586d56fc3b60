"""``POST /v1/prepare`` with ``wait_s``: the answer comes once the task is prepared and its naive
baseline is timed and stored in the host's store (or after ``wait_s``, saying it was not), so a caller
(the scaling benchmark's ``--prepare-first``, a job that wants its first candidate to find everything
made) can tell when the task's first evaluation is no longer a first. A real executor on loopback in
the test-only host runtime with ``host_baseline`` on (a baseline worker per task, as on the GPU), the
real nvcc building the task's ``naive.cu``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from executor.app import create_app
from executor.basetiming import baseline_key
from executor.client import ExecutorClient
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, parse_task
from tests.support.hostcode import FAST, one_input_task
from tests.support.servers import serve_in_thread

OPTIONS = FAST.model_copy(update={"baseline": True, "min_trials": 5, "max_trials": 9})
HEAD = 'extern "C" void twice(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
HONEST = HEAD + BODY + " }" + STUB


def _task(tag: str) -> FunctionTask | KernelTask:
    spec = one_input_task("twice", domain="elementwise", description="y[i] = 2 x[i]", timing=65536)
    return parse_task(
        {**spec, "reference_source": HEAD + BODY + " }", "naive_source": HEAD + BODY + f" }} // {tag}\n"}
    )


def _settings(cache: Path) -> ExecutorSettings:
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    # prepare_tasks off: only the call can have prepared the task
    return ExecutorSettings(
        cache_dir=cache,
        runtime="host",
        run_timeout_s=120,
        host_baseline=True,
        prepare_next=False,
        prewarm_workers=False,
        prepare_tasks=False,
    )


def _record(cache: Path, task: FunctionTask | KernelTask) -> Path:
    return cache / "baseline-timings" / "host-cpu" / f"{baseline_key(task, OPTIONS)}.json"


def test_a_waiting_prepare_answers_once_the_baseline_is_stored(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    task = _task("waited")
    with serve_in_thread(create_app(_settings(cache))) as url, ExecutorClient(url, timeout_s=300) as client:
        began = time.monotonic()
        answer = client.prepare(task, OPTIONS, wait_s=240)
        assert answer.started and answer.ready, answer
        assert answer.baseline == "kept", answer
        assert answer.waited_s is not None and 0 < answer.waited_s <= time.monotonic() - began
        # the host's store has the baseline when the answer comes, not later
        assert json.loads(_record(cache, task).read_text())["timing"]["median_ms"] > 0
        # asked again: nothing started, ready at once
        again = client.prepare(task, OPTIONS, wait_s=240)
        assert not again.started and again.ready and again.baseline == "kept", again
        assert again.waited_s is not None and again.waited_s < 5
        # the task's first candidate finds its baseline timed: its evaluation neither times nor waits
        verdict = client.evaluate(task, HONEST, OPTIONS)
    assert verdict.passed, verdict.message
    assert verdict.baseline_timing is not None
    assert "baseline_timing" not in verdict.seconds and "baseline_wait" not in verdict.seconds
    assert "timing_set" not in verdict.seconds and "reference_timing" not in verdict.seconds


def test_a_prepare_that_cannot_wait_long_enough_says_it_is_not_ready(tmp_path: Path) -> None:
    """A wait shorter than the work: the answer comes after it, saying the task is not ready yet (it
    never claims a baseline it has not stored); the preparation goes on, and a later wait finds it."""
    cache = tmp_path / "cache"
    task = _task("short")
    with serve_in_thread(create_app(_settings(cache))) as url, ExecutorClient(url, timeout_s=300) as client:
        short = client.prepare(task, OPTIONS, wait_s=0.3)
        assert short.started and short.ready is False, short
        assert short.baseline in ("none", "measuring"), short
        assert short.waited_s is not None and 0.3 <= short.waited_s < 5
        assert not _record(cache, task).exists()
        # without wait_s the answer is the old one: at once, nothing said about readiness
        quick = client.prepare(task, OPTIONS)
        assert not quick.started and quick.ready is None and quick.baseline is None
        later = client.prepare(task, OPTIONS, wait_s=240)
        assert not later.started and later.ready and later.baseline == "kept", later
        assert _record(cache, task).exists()
