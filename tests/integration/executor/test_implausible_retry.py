"""An ``implausible`` verdict from a check that a disturbed host can trip for honest code (the clock
windows, the repeat-visit rule) is not final at once: the evaluator runs the candidate once more, on
fresh workers, and the second verdict stands (executor.clockcheck.retried_when_refused). Two replicas on
one host refused 3 of 79 honest function candidates so in session 25's scaling run. A candidate that
really fools the checks is refused again; the physical floor's refusal is not retried.

Real evaluators in the test-only ``host`` runtime. The disturbance is played by the candidate itself:
in the first process that runs it (a SysV semaphore made with IPC_EXCL marks that one; the workers
share the host's IPC namespace), its first call on each new buffer at the timing size spins 100 ms
first, as a first visit does while another replica's worker start-up stalls the driver; everywhere
else it is plain saxpy. The repeat-visit rule refuses that first run."""

from __future__ import annotations

import ctypes
import ctypes.util
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.clockcheck import retried_when_refused
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, ErrorKind, EvaluationOptions, Stage, Verdict
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import FloorCheck

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
DISTURBED_ONCE = (
    "#include <chrono>\n"
    'extern "C" int semget(int key, int nsems, int flags);\n'
    "static int first_process = -1;  // 1: the first process to run this candidate\n"
    "static const float* seen[64];\nstatic int nseen = 0;\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "    if (first_process < 0) first_process = semget(KEY, 1, 01000 | 02000 | 0600) >= 0 ? 1 : 0;\n"
    "    bool fresh = true;\n"
    "    for (int i = 0; i < nseen; ++i) fresh = fresh && seen[i] != x;\n"
    "    if (fresh && nseen < 64) seen[nseen++] = x;\n"
    "    if (first_process == 1 && fresh && n > 100000) {\n"
    "        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);\n"
    "        while (std::chrono::steady_clock::now() < until) {}\n"
    "    }\n"
    "    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n" + STUB
)
# One copy of each timing set (the first three trials are the first visits, the rest repeat them).
OPTIONS = EvaluationOptions(
    min_trials=7, max_trials=12, min_timing_ms=5, reference_repeats=1, baseline=False, rotate_buffers=1
)


@pytest.fixture
def semaphore_key() -> Iterator[int]:
    key = secrets.randbelow(1 << 30) + 1
    yield key
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    ident = libc.semget(key, 1, 0)
    if ident >= 0:
        libc.semctl(ident, 0, 0)  # IPC_RMID


def test_an_honest_candidate_disturbed_in_its_first_run_passes_when_run_again(
    tmp_path: Path, semaphore_key: int
) -> None:
    task = load_task(TASKS_DIR / "saxpy")
    source = DISTURBED_ONCE.replace("KEY", str(semaphore_key))
    evaluator = Evaluator(
        ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", prewarm_workers=False)
    )
    try:
        verdict = evaluator.evaluate(task, CandidateSource(source=source), OPTIONS)
    finally:
        evaluator.close()
    assert verdict.passed, (verdict.error, verdict.message)
    assert verdict.seconds["refused_before_s"] > 0  # the first run was refused, the second passed


def _verdict(error: ErrorKind, floor: FloorCheck | None) -> Verdict:
    return Verdict(task_id="t", stage=Stage.TIMING, passed=False, error=error, message="m", floor=floor)


def test_only_refusals_a_disturbed_host_can_cause_are_retried() -> None:
    above = FloorCheck(floor_ms=1.0, measured_ms=5.0)
    below = FloorCheck(floor_ms=1.0, measured_ms=0.2)
    assert retried_when_refused(_verdict(ErrorKind.IMPLAUSIBLE, above))  # the clock or repeat rule
    assert retried_when_refused(_verdict(ErrorKind.IMPLAUSIBLE, None))  # refused before the floor's check
    assert not retried_when_refused(_verdict(ErrorKind.IMPLAUSIBLE, below))  # the physical floor's
    assert not retried_when_refused(_verdict(ErrorKind.WRONG_OUTPUT, above))
