"""The evaluator marks a compute-bound function task's runs (executor.evaluate._host_shared), and their
trials then hold the host memory's lock shared (executor.gpulock.function_run_shared; issue 29): a real
evaluator on the test-only ``host`` runtime (its naive baselines timed, ``host_baseline``), real workers
and lock files, the real nvcc (skipped without it). Another process holds the pool's host-memory lock
shared, as another GPU's compute-bound trials, correctness calls or host copies do: a compute-bound
task's trials go on beside it once its naive baseline's median is kept, a run of a task not known so
(its first, no baseline, or REGRAPH_HOST_SHARED_BELOW_GBPS=0) waits for it, and a copy-bound task's runs
are never marked. Only the baseline's median decides, never a candidate's (a slow one on purpose), and
the baseline's own run holds it alone; the judgement is made again at the run's turn, both ways."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from executor.evaluate import Evaluator
from executor.gpulock import HOST_SHARED_ENV
from executor.protocol import CandidateSource, EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask, parse_task
from executor.verdict import Verdict
from tests.support.hostcode import FAST, GPULOCK, STUB, gpulock_alone, host_evaluator, one_input_task

HEAD = 'extern "C" void twice(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"
# 3 ms a call, whatever n: 512 KB of arrays at the timing size move at 0.17 GB/s (compute-bound).
SLOW = (
    "#include <chrono>\n" + HEAD + "auto until = std::chrono::steady_clock::now() + "
    "std::chrono::milliseconds(3);\nwhile (std::chrono::steady_clock::now() < until) {}\n"
    + BODY
    + " }"
    + STUB
)
QUICK = HEAD + BODY + " }" + STUB  # microseconds a call: many GB/s (copy-bound)
# With the naive baseline timed (a worker of its own, once per task) and kept: what decides.
TIMED = FAST.model_copy(update={"baseline": True})

# Holds the host-memory lock of the pool whose GPU lock is argv[1], shared: with argv[2] "0" until it is
# killed; else until an exclusive request (the trials of a run not marked) has waited at the lock's
# turnstile for argv[2] seconds (a shared request only passes through it, for microseconds). It loads
# executor/gpulock.py (argv[3]: the standard library only) alone, not the package, to start at once.
HOLDER = (
    gpulock_alone("sys.argv[3]")
    + """
import fcntl, time
turnstile = gpulock.turnstile_path(gpulock.lock_path(sys.argv[1], "host"))
with gpulock.hold(sys.argv[1], "shared", "host"):
    print("held", flush=True)
    if float(sys.argv[2]) == 0:
        time.sleep(600)
    busy_since = None
    while busy_since is None or time.monotonic() - busy_since < float(sys.argv[2]):
        time.sleep(0.01)
        if gpulock.would_wait(turnstile, fcntl.LOCK_EX):
            busy_since = busy_since or time.monotonic()
        else:
            busy_since = None
"""
)


def _task(timing: int, naive: str) -> FunctionTask | KernelTask:
    spec = one_input_task("twice", domain="elementwise", description="y[i] = 2 x[i]", timing=timing)
    return parse_task({**spec, "reference_source": HEAD + BODY + " }", "naive_source": naive})


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    with host_evaluator(
        tmp_path_factory.mktemp("compute-bound") / "cache",
        run_limit_floor_s=60,  # a run that waits for the holder is not killed for it
        prepare_next=False,
        host_baseline=True,
    ) as built:
        yield built


def _evaluate_beside_a_shared_holder(
    evaluator: Evaluator,
    task: FunctionTask | KernelTask,
    source: str,
    hold_s: float,
    options: EvaluationOptions = TIMED,
) -> dict[str, float]:
    """A verdict's seconds for ``source``, evaluated while another process holds the host memory shared:
    until it is killed after the verdict (``hold_s`` 0), or until a request of it alone has waited
    ``hold_s`` at its turnstile."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(evaluator.pool.gpu_lock), str(hold_s), str(GPULOCK)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        verdict = evaluator.evaluate(task, CandidateSource(source=source), options)
    finally:
        holder.kill()
        holder.wait()
    assert verdict.passed, verdict.message
    return verdict.seconds


def test_a_compute_bound_tasks_trials_go_on_beside_other_host_memory_holders(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HOST_SHARED_ENV, raising=False)
    task = _task(65536, naive=SLOW)
    first = evaluator.evaluate(task, CandidateSource(source=SLOW), TIMED)
    assert first.passed, first.message
    assert first.seconds["baseline_host_shared"] == 0.0  # the baseline's own run: nothing kept, alone
    # its baseline's median kept now: the next run's trials do not wait for the holder
    beside = _evaluate_beside_a_shared_holder(evaluator, task, SLOW + "// 2\n", hold_s=0)
    assert beside["host_shared"] == 1.0
    assert beside["timing_lock_wait"] < 5.0, beside
    # with the threshold at 0 the trials hold it alone as before, and so wait for the holder
    monkeypatch.setenv(HOST_SHARED_ENV, "0")
    alone = _evaluate_beside_a_shared_holder(evaluator, task, SLOW + "// 3\n", hold_s=1.5)
    assert alone["host_shared"] == 0.0
    assert alone["timing_lock_wait"] > 1.0, alone


def test_a_slow_candidate_never_gets_a_copy_bound_task_judged_compute_bound(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review F1: a candidate slow on purpose (3 ms a call) on a task whose naive baseline is quick
    (copy-bound): neither the baseline's own run nor a later candidate's trials hold the host shared."""
    monkeypatch.delenv(HOST_SHARED_ENV, raising=False)
    task = _task(131072, naive=QUICK)
    slow = evaluator.evaluate(task, CandidateSource(source=SLOW), FAST)  # no baseline wanted
    assert slow.passed, slow.message
    assert slow.seconds["host_shared"] == 0.0
    # the baseline timed now, after a slow correct candidate: alone all the same
    timed = evaluator.evaluate(task, CandidateSource(source=SLOW + "// 2\n"), TIMED)
    assert timed.passed, timed.message
    assert timed.seconds["baseline_host_shared"] == 0.0
    assert timed.seconds["host_shared"] == 0.0
    # no baseline wanted: nothing but candidates known, and they never decide: alone, so it waits
    alone = _evaluate_beside_a_shared_holder(evaluator, task, SLOW + "// 3\n", hold_s=1.5, options=FAST)
    assert alone["host_shared"] == 0.0
    assert alone["timing_lock_wait"] > 1.0, alone


def test_the_turn_judges_again_both_ways(evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review F2: a run built as compute-bound that is no longer so when its turn comes (the threshold
    set to 0 meanwhile) holds the host memory alone."""
    monkeypatch.delenv(HOST_SHARED_ENV, raising=False)
    task = _task(32768, naive=SLOW)
    first = evaluator.evaluate(task, CandidateSource(source=SLOW), TIMED)
    assert first.passed, first.message
    with ThreadPoolExecutor(1) as pool:
        with evaluator.turns.turn("function"):  # its run is built, then waits here
            later = pool.submit(evaluator.evaluate, task, CandidateSource(source=SLOW + "// 4\n"), TIMED)
            waited = time.monotonic()
            while not evaluator.turns.waiting():
                assert time.monotonic() - waited < 120 and not later.done(), "it never waited for its turn"
                time.sleep(0.02)
            monkeypatch.setenv(HOST_SHARED_ENV, "0")
        verdict: Verdict = later.result(timeout=240)
    assert verdict.passed, verdict.message
    assert verdict.seconds["host_shared"] == 0.0


def test_a_copy_bound_tasks_runs_are_never_marked(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HOST_SHARED_ENV, raising=False)
    task = _task(262144, naive=QUICK)
    for tag in ("", "// 2\n"):
        verdict = evaluator.evaluate(task, CandidateSource(source=QUICK + tag), TIMED)
        assert verdict.passed, verdict.message
        assert verdict.seconds["host_shared"] == 0.0
