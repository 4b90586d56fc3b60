"""A released function worker's deadline after its GPU release (executor.sandbox.WorkerProcess.wait)
covers what its host checks must do, not only its time under the turn: the wait for the host memory's
lock, which another run's trials may hold alone (another GPU's copy-bound trials on a two-GPU host:
session 26 killed an honest game_of_life_u8 that waited so), is not counted against it, and the task's
bytes at a conservative host rate are added. A real evaluator on the test-only ``host`` runtime, real
workers and lock files, the real nvcc (skipped without it); another process takes the host memory's
lock alone as the candidate's trials end and keeps it for longer than the allowance."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import CHECKS_HOST_GBPS, Evaluator, post_release_checks_s
from executor.protocol import CandidateSource, EvaluationOptions
from executor.sandbox import POST_RELEASE_MIN_S
from executor.taskformat import FunctionTask, KernelTask, load_task
from tests.support.hostcode import FIVE_CHECKED, FIXTURE_TASKS, GPULOCK, STUB, gpulock_alone, host_evaluator

ROOT = Path(__file__).resolve().parents[3]

# Right, and 25 ms a call whatever n: its trials hold the host memory alone long enough to be seen.
SLOW_SAXPY = (
    "#include <chrono>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(25);\n"
    "while (std::chrono::steady_clock::now() < until) {}\n"
    "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }" + STUB
)
OPTIONS = FIVE_CHECKED
# For the watched run: what its checks may read counts for 2.7 s (an upper bound: ten 32 MB copies of
# saxpy's arrays, each read twice, at 0.25 GB/s), more than its time under the turn gives.
WATCHED = OPTIONS.model_copy(update={"timing_sets": 4, "host_rotate_buffers": 8})
# More than the allowance (2.7 s and twice its time under the turn, 0.5 s here; 1.3 s to spare).
HOLD_S = 5.0
# Waits until the host memory's lock of the pool whose GPU lock is argv[1] is held alone (the trials),
# then asks for it alone (at its turnstile: the released worker's checks then wait too), holds it for
# argv[2] seconds once it has it, and says when it let go. It loads executor/gpulock.py (argv[3]: the
# standard library only) alone, not the package (numpy, pydantic), to start at once.
HOLDER = (
    gpulock_alone("sys.argv[3]")
    + """
import fcntl, time
path = gpulock.lock_path(sys.argv[1], "host")
print("watching", flush=True)
while not gpulock.would_wait(path, fcntl.LOCK_SH):
    time.sleep(0.001)
with gpulock.hold(sys.argv[1], "exclusive", "host"):
    time.sleep(float(sys.argv[2]))
print("let go", flush=True)
"""
)


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(FIXTURE_TASKS / "saxpy")


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    with host_evaluator(
        tmp_path_factory.mktemp("post-release") / "cache",
        run_limit_floor_s=60,  # the run limit is not what this test is about
        release_gpu_early=True,
        prepare_next=False,
    ) as built:
        yield built


def test_the_checks_wait_for_the_host_memory_is_not_counted_against_the_candidate(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    warm = evaluator.evaluate(saxpy, CandidateSource(source=SLOW_SAXPY), OPTIONS)
    assert warm.passed, warm.message
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(evaluator.pool.gpu_lock), str(HOLD_S), str(GPULOCK)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "watching"
        verdict = evaluator.evaluate(saxpy, CandidateSource(source=SLOW_SAXPY + "// 2\n"), WATCHED)
        assert holder.stdout.readline().strip() == "let go"  # it held the lock during this run
    finally:
        holder.kill()
        holder.wait()
    seconds = verdict.seconds
    assert verdict.passed, (verdict.message, str(seconds))
    # the checks waited for the holder, far past the allowance for its time under the turn ...
    assert seconds["after_release"] > 2 * seconds["gpu_held"] + POST_RELEASE_MIN_S, str(seconds)
    # ... and that wait was credited, not charged
    assert seconds["released_lock_credit"] >= HOLD_S / 2, str(seconds)
    # the allowance itself counts the checks' bytes beside twice its time under the turn (less the
    # hand-over before the worker's wait began: 0.25 s is ample)
    checks_s = post_release_checks_s(saxpy, WATCHED)
    assert checks_s > 2.5
    assert seconds["release_allowance"] >= checks_s + 2 * seconds["gpu_held"] - 0.5, str(seconds)


def test_the_allowance_counts_the_tasks_bytes_for_the_checks() -> None:
    """game_of_life_u8: 32 MB of arrays at the timing size; with the default options four copies (two
    sets, one copy each, the warm-up's and a confirming call's), each read twice."""
    task = load_task(ROOT / "regraph_data" / "tasks" / "game_of_life_u8")
    options = EvaluationOptions()
    want = 4 * 2 * (2 * 4096 * 4096) / (CHECKS_HOST_GBPS * 1e9)
    assert post_release_checks_s(task, options) == pytest.approx(want)
    assert post_release_checks_s(task, options.model_copy(update={"timing_sets": 4})) == pytest.approx(
        want * 6 / 4
    )
    assert (
        post_release_checks_s(load_task(FIXTURE_TASKS / "scale_kernel"), options) == 0.0
    )  # nothing released
