"""The evaluator's GPU turns with the issue-29 settings on (``gpu_kernel_first``, ``timings_at_turn``), in
the test-only ``host`` runtime: real worker processes, candidates compiled by the real nvcc and run on
the CPU. The order policy itself is checked with threads in tests/unit/executor/test_executor_gputurns.py;
here, that the evaluator wires it to its real pool (the device's lock, the reaper) and still gives one
verdict per candidate, one run at a time."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.gpulock import LOCK_ENV
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind, TimingStats
from executor.worker.messages import CandidateRun
from tests.support.hostcode import FIXTURE_TASKS as TASKS_DIR
from tests.support.hostcode import SAXPY_CORRECT as CORRECT
from tests.support.hostcode import SAXPY_HEAD as HEAD
from tests.support.hostcode import STUB

ROOT = Path(__file__).resolve().parents[3]
WRONG = HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] - y[i]; }" + STUB
QUICK = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("turns-cache"),
        runtime="host",
        run_timeout_s=60,
        compile_workers=2,
        gpu_kernel_first=True,
        timings_at_turn=True,
        # The turns, not the spares (test_executor_prewarm.py): no spare or prepared workers, which the
        # module's close would kill unused.
        prewarm_workers=False,
    )
    built = Evaluator(settings)
    yield built
    built.close()


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


def test_candidates_in_flight_together_get_one_verdict_each_through_the_turns(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    sources = [CORRECT + f"\n// {n}\n" for n in range(3)] + [WRONG]
    held_seen = False
    seen = threading.Event()

    def watch() -> None:  # that the runs went through the turns, sampled while the four are in flight
        nonlocal held_seen
        while not seen.is_set():
            held_seen = held_seen or evaluator.turns.locked()
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(
            pool.map(lambda s: evaluator.evaluate(saxpy, CandidateSource(source=s), QUICK), sources)
        )
    seen.set()
    watcher.join(timeout=5)
    assert [v.passed for v in verdicts] == [True, True, True, False]
    assert verdicts[3].error is ErrorKind.WRONG_OUTPUT
    assert all("gpu_held" in v.seconds for v in verdicts)
    # with gpu_kernel_first on, each function run says how often it was passed over (no kernel runs here)
    assert all(v.seconds.get("turn_skipped") == 0.0 for v in verdicts)
    # (that no two held it at once is checked with threads in the unit test)
    assert held_seen and not evaluator.turns.locked() and evaluator.turns.waiting() == []


HOLD_SHARED = """
import sys
from executor.gpulock import gpu_lock
with gpu_lock("shared"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_the_busy_probe_sees_another_process_on_the_pools_gpu_lock(evaluator: Evaluator) -> None:
    evaluator.wait_for_preparation()
    assert evaluator.pool.drain(timeout_s=30)
    assert not evaluator._busy_for_host_timing()
    env = dict(os.environ, **{LOCK_ENV: str(evaluator.pool.gpu_lock)}, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_SHARED], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert evaluator._busy_for_host_timing()  # a spare making its context, say
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    assert not evaluator._busy_for_host_timing()


def _stats(median_ms: float) -> TimingStats:
    return TimingStats(
        median_ms=median_ms,
        iqr_ms=0.0,
        cov=0.0,
        trials=5,
        mean_ms=median_ms,
        min_ms=median_ms,
        max_ms=median_ms,
    )


def test_a_run_takes_the_timings_another_candidate_made_while_it_waited(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    bare = CandidateRun(candidate_product="c.so", candidate_symbol="saxpy")
    if evaluator._cached_timing("reference", saxpy) is None:  # the module's other tests ran elsewhere
        evaluator._remember("reference", saxpy, _stats(5.0))
    known_reference = evaluator._cached_timing("reference", saxpy)
    assert known_reference is not None
    assert evaluator._timings_now(saxpy, bare).reference_timing == known_reference
    # a run that has its timing keeps it
    own = bare.model_copy(update={"reference_timing": _stats(7.0)})
    kept = evaluator._timings_now(saxpy, own)
    assert kept.reference_timing is not None and kept.reference_timing.median_ms == 7.0
