"""A naive baseline's own trials hold the host memory's lock shared when its pilot calls say the task is
compute-bound (``baseline_host_pilot``, executor.worker.baseline.BaselineWorker.pilot_ms; issue 29).

Before session 27 a baseline's own trials always held that lock (the host's, every GPU's) alone, since no
median of the task was kept yet: on two H200s they were about 60 % of the time it was held alone
(bench/results/2026-11-30_s27/fleet_breakdown.md). Now the baseline worker first times a few pilot calls
under the trials' locks held alone, and when the fastest is slower than the task's arrays moving at the
compute-bound threshold, its trials hold the host memory shared, as a candidate's do once that median is
kept. Real baseline workers (the test-only ``host`` runtime), real lock files, another real process
holding the host memory shared as another GPU's checks or compute-bound trials do; g++ builds the
naive baselines, the evaluator's test uses the real nvcc (skipped without it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor import baseline
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource
from executor.sandbox import WorkerPool
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, parse_task
from executor.worker.messages import BaselineOutcome
from tests.support.hostcode import (
    FAST,
    GPULOCK,
    STUB,
    build_host_candidates,
    gpulock_alone,
    one_input_task,
    timing_set_job,
)

OPTIONS = FAST.model_copy(update={"baseline": True, "min_trials": 5, "max_trials": 9})
HEAD = 'extern "C" void twice(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"
# 3 ms a call whatever n: compute-bound at any threshold the tests pass
SLOW = (
    "#include <chrono>\n" + HEAD + "auto until = std::chrono::steady_clock::now() + "
    "std::chrono::milliseconds(3);\nwhile (std::chrono::steady_clock::now() < until) {}\n" + BODY + " }"
)
QUICK = HEAD + BODY + " }"  # 65,536 floats: well under a millisecond a call
# QUICK, but its first call takes 40 ms (as a first call that loads a module or reads cold memory may):
# longer than the pilot's 30 ms on its own
COLD_FIRST = (
    "#include <chrono>\n" + HEAD + "static int calls = 0;\nif (calls++ == 0) {\n"
    "  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(40);\n"
    "  while (std::chrono::steady_clock::now() < until) {}\n}\n" + BODY + " }"
)
# The pilot's threshold the worker tests hand over: between QUICK's calls and SLOW's.
ABOVE_MS = 1.5

# Holds the host-memory lock of the pool whose GPU lock is argv[1] shared; once an exclusive request (the
# baseline's pilot) has waited at its turnstile for 0.2 s, lets it go and asks for it shared again at
# once (waiting while the pilot holds it alone), prints "again" when it has it and holds it until killed.
# gpulock.py (argv[2]) is loaded alone, to start at once.
RETAKER = (
    gpulock_alone("sys.argv[2]")
    + """
import fcntl, time
turnstile = gpulock.turnstile_path(gpulock.lock_path(sys.argv[1], "host"))
with gpulock.hold(sys.argv[1], "shared", "host"):
    print("held", flush=True)
    busy_since = None
    while busy_since is None or time.monotonic() - busy_since < 0.2:
        time.sleep(0.01)
        if gpulock.would_wait(turnstile, fcntl.LOCK_EX):
            busy_since = busy_since or time.monotonic()
        else:
            busy_since = None
with gpulock.hold(sys.argv[1], "shared", "host"):
    print("again", flush=True)
    time.sleep(600)
"""
)


def _task(naive: str = QUICK) -> FunctionTask | KernelTask:
    spec = one_input_task("twice", domain="elementwise", description="y[i] = 2 x[i]", timing=65536)
    return parse_task({**spec, "reference_source": HEAD + BODY + " }", "naive_source": naive})


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(
        tmp_path_factory.mktemp("pilot-builds"), {"slow": SLOW, "quick": QUICK, "cold": COLD_FIRST}
    )


def _measure(
    pool: WorkerPool, tmp_path: Path, product: str, above_ms: float | None, timeout_s: float = 60
) -> BaselineOutcome:
    job = timing_set_job(_task(), tmp_path, OPTIONS, baseline_copies=True)
    return baseline.measure(pool, job, lambda: product, timeout_s, pilot_above_ms=lambda: above_ms)


def test_a_compute_bound_baselines_trials_go_on_beside_another_host_memory_holder(
    products: dict[str, str], tmp_path: Path
) -> None:
    """The pilot takes the lock alone (the holder lets go for it), the trials then hold it shared: the
    holder's second hold begins while they run and lasts until it is killed, after the outcome. Held
    alone, the trials would wait for it until the worker's limit (the outcome a failure)."""
    pool = WorkerPool("host", prewarm=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", RETAKER, str(pool.gpu_lock), str(GPULOCK)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        outcome = _measure(pool, tmp_path, products["slow"], ABOVE_MS, timeout_s=20)
        assert holder.poll() is None  # still holding its second hold
        assert holder.stdout.readline().strip() == "again"
    finally:
        holder.kill()
        holder.wait()
        pool.close()
    assert outcome.ok, outcome.message
    assert outcome.seconds["pilot_shared"] == 1.0 and outcome.seconds["host_shared"] == 1.0
    assert outcome.seconds["pilot_ms"] > ABOVE_MS
    assert outcome.timing is not None and outcome.timing.median_ms >= 2.5


def test_a_copy_bound_pilot_or_none_leaves_the_trials_alone(products: dict[str, str], tmp_path: Path) -> None:
    pool = WorkerPool("host", prewarm=False)
    try:
        quick = _measure(pool, tmp_path / "quick", products["quick"], ABOVE_MS)
        unpiloted = _measure(pool, tmp_path / "none", products["slow"], None)
    finally:
        pool.close()
    assert quick.ok and unpiloted.ok, (quick.message, unpiloted.message)
    assert quick.seconds["pilot_shared"] == 0.0 and quick.seconds["host_shared"] == 0.0
    assert quick.seconds["pilot_ms"] < ABOVE_MS
    assert "pilot_ms" not in unpiloted.seconds and unpiloted.seconds["host_shared"] == 0.0


def test_a_slow_first_call_is_never_the_pilots_only_one(products: dict[str, str], tmp_path: Path) -> None:
    """Its first call alone (40 ms, past the pilot's 30) would say compute-bound; the second says not."""
    pool = WorkerPool("host", prewarm=False)
    try:
        cold = _measure(pool, tmp_path, products["cold"], ABOVE_MS)
    finally:
        pool.close()
    assert cold.ok, cold.message
    assert cold.seconds["pilot_shared"] == 0.0 and cold.seconds["pilot_ms"] < ABOVE_MS


@pytest.fixture(scope="module")
def evaluators(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Evaluator]]:
    """Two evaluators of the host runtime with baselines timed: the pilot on (the default) and off."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    built = {}
    try:
        for pilot in (True, False):
            fields = {"runtime": "host", "run_timeout_s": 120, "host_baseline": True, "prepare_next": False}
            if not pilot:
                fields["baseline_host_pilot"] = False
            cache = tmp_path_factory.mktemp(f"pilot-{pilot}") / "cache"
            built[pilot] = Evaluator(ExecutorSettings.model_validate({"cache_dir": cache, **fields}))
        yield built
    finally:
        for evaluator in built.values():
            evaluator.close()


def test_the_setting_decides_whether_a_baselines_own_run_is_piloted(
    evaluators: dict[bool, Evaluator],
) -> None:
    """A task's first evaluation: its baseline, compute-bound, holds the host memory shared with the
    pilot (the default) and alone without it, as before session 27."""
    assert ExecutorSettings().baseline_host_pilot is True
    task = _task(SLOW + STUB)
    for pilot, shared in ((True, 1.0), (False, 0.0)):
        verdict = evaluators[pilot].evaluate(task, CandidateSource(source=QUICK + STUB), OPTIONS)
        assert verdict.passed, verdict.message
        assert verdict.seconds["baseline_host_shared"] == shared, (pilot, verdict.seconds)
