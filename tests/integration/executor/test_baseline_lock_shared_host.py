"""A task's naive baseline is timed once by the host's executors, never twice at once (executor.basetiming
claim; issue 29): two real evaluators sharing a store directory, asked for the same baseline together,
as two replicas of a fleet are when a task's candidates spill to the second; one times it, the other
waits for its claim (a lock file under the store) and reads the stored timing. A holder that dies lets
the claim go, and the waiter then times it itself. The test-only ``host`` runtime with ``host_baseline``,
real worker processes and the real nvcc (skipped without it)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from executor.basetiming import BaselineTimings, baseline_key
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.evaluate import Evaluator
from executor.reference import build_reference
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, parse_task
from executor.worker.messages import BaselineOutcome
from tests.support.hostcode import FAST, one_input_task

ROOT = Path(__file__).resolve().parents[3]
OPTIONS = FAST.model_copy(update={"baseline": True, "min_trials": 5, "max_trials": 9})
HEAD = 'extern "C" void twice(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"


def _task(tag: str) -> FunctionTask | KernelTask:
    spec = one_input_task("twice", domain="elementwise", description="y[i] = 2 x[i]", timing=65536)
    return parse_task(
        {**spec, "reference_source": HEAD + BODY + " }", "naive_source": f"{HEAD}{BODY} }}// {tag}\n"}
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Evaluator, Evaluator]]:
    """Two executors of one host with one cache directory (the baselines' store in it)."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    cache = tmp_path_factory.mktemp("shared-store") / "cache"
    settings = ExecutorSettings(
        cache_dir=cache, runtime="host", run_timeout_s=120, host_baseline=True, prepare_next=False
    )
    built = (Evaluator(settings), Evaluator(settings))
    try:
        yield built
    finally:
        for evaluator in built:
            evaluator.close()


def _measure(evaluator: Evaluator, task: FunctionTask | KernelTask) -> BaselineOutcome:
    """The evaluator's baseline measurement of ``task``, started now and waited for."""
    reference = build_reference(task, evaluator.settings.cache_dir)
    started = evaluator._measure_baseline(task, OPTIONS, "host", reference)
    assert started is not None and started[1]  # a measurement of its own, not one it had
    future: Future[BaselineOutcome] = started[0]
    return future.result(timeout=240)


def test_two_executors_asked_together_time_the_baseline_once(pair: tuple[Evaluator, Evaluator]) -> None:
    task = _task("together")
    outcomes: dict[int, BaselineOutcome] = {}
    go = threading.Barrier(2)

    def ask(i: int) -> None:
        go.wait()
        outcomes[i] = _measure(pair[i], task)

    threads = [threading.Thread(target=ask, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert all(o.ok for o in outcomes.values()), outcomes
    timed = [i for i, o in outcomes.items() if "baseline_timing" in o.seconds]
    assert len(timed) == 1, {i: o.message for i, o in outcomes.items()}  # one worker timed it
    (reader,) = {0, 1} - set(timed)
    assert outcomes[reader].message == "timed by another executor of the host"
    assert outcomes[reader].seconds["baseline_claim_wait"] > 0  # it waited for the other's claim
    assert outcomes[reader].timing == outcomes[timed[0]].timing
    # each keeps the one timing, as the store has it
    for evaluator in pair:
        assert evaluator._cached_timing("baseline", task, OPTIONS) == outcomes[timed[0]].timing


HOLDER = """
import sys, time
from pathlib import Path
from executor.basetiming import BaselineTimings
with BaselineTimings(Path(sys.argv[1]), 3600).claim(sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_dead_holders_claim_goes_and_the_waiter_times_the_baseline_itself(
    pair: tuple[Evaluator, Evaluator],
) -> None:
    first, _ = pair
    task = _task("dead holder")
    store = first.settings.cache_dir / "baseline-timings"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store), baseline_key(task, OPTIONS)],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        reference = build_reference(task, first.settings.cache_dir)
        started = first._measure_baseline(task, OPTIONS, "host", reference)
        assert started is not None
        with pytest.raises(TimeoutError):  # it waits for the holder, which times nothing
            started[0].result(timeout=3.0)
        holder.kill()  # a replica that dies while it holds the claim
        outcome = started[0].result(timeout=240)
    finally:
        holder.kill()
        holder.wait()
    assert outcome.ok, outcome.message
    assert "baseline_timing" in outcome.seconds  # none stored by the dead one: timed here
    assert outcome.seconds["baseline_claim_wait"] >= 3.0
    assert (
        BaselineTimings(store, 3600).load(first.device or "", baseline_key(task, OPTIONS)) == outcome.timing
    )
