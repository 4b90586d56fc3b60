"""The per-call limit: a hanging candidate call is killed at its own limit, long before the run limit.

Real worker processes in the test-only ``host`` runtime run plain C++ candidates compiled into shared
libraries (the path that loads a .so and calls its entry is the GPU function runtime's too); the
worker announces each call on its done pipe and the parent kills a call that runs past its limit.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource
from executor.reference import build_reference
from executor.runlimit import CallLimit, call_limit
from executor.sandbox import run_job
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, WorkerJob
from tests.support.hostcode import FAST, build_host_candidates, use_worker_process

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
# Four correctness calls, then one warm-up call (no warm-up time) and three to five timed calls.
OPTIONS = FAST.model_copy(update={"warmup_ms": 0.0})
# The run limit of these tests: far above what a call limit allows, so a kill before it is the call's.
RUN_LIMIT_S = 60.0
# Each call may take 1.5 s + 10 x 1 ms.
LIMIT = call_limit(floor_s=1.5, factor=10.0, reference_ms=1.0)
SLEEP_MS = 300  # the slow candidate's time per call: within its limit, but ten calls exceed one limit

HEAD = '#include <unistd.h>\nextern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
SAXPY = "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];"
SPIN = "volatile int k = 0; while (true) { k = k + 1; }"
CANDIDATES = {
    "hang": HEAD + SPIN + " }",
    "slow": HEAD + f"usleep({SLEEP_MS * 1000}); " + SAXPY + " }",
    # Writes "a call has ended" on the worker's done pipe without end, in a loop that never returns.
    "fake_ends": "#include <cstdlib>\n"
    + HEAD
    + 'const char* fd = std::getenv("REGRAPH_DONE_FD"); int f = fd ? std::atoi(fd) : -1;'
    ' while (true) { if (f >= 0 && write(f, "end\\n", 4) < 0) f = -1; } }',
    # Right on the four correctness calls and the warm-up call; hangs on the second timed call.
    "late_hang": HEAD + "static int calls = 0; if (++calls >= 7) { " + SPIN + " } " + SAXPY + " }",
}


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(tmp_path_factory.mktemp("call-limit-candidates"), CANDIDATES)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> WorkerJob:
    task = load_task(TASKS_DIR / "saxpy")
    return WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, tmp_path_factory.mktemp("call-limit-cache"))),
        seeds=[11, 22, 33],
        options=OPTIONS,
    )


def _run(product: str, limit: CallLimit | None = LIMIT) -> CandidateRun:
    return CandidateRun(candidate_product=product, candidate_symbol="saxpy", call_limit=limit)


def test_a_hang_in_the_first_call_is_killed_at_the_call_limit(
    job: WorkerJob, products: dict[str, str], tmp_path: Path
) -> None:
    assert LIMIT is not None and LIMIT.seconds == pytest.approx(1.51)
    outcome = run_job(job, _run(products["hang"]), timeout_s=120, workdir=tmp_path, run_limit_s=RUN_LIMIT_S)
    assert outcome.error is ErrorKind.TIMEOUT and not outcome.passed
    assert outcome.killed_by == "call" and outcome.stage == "correctness"
    message = outcome.message
    assert "during correctness: the call on input set 1 of 3 (test size) ran longer than" in message
    assert "its call limit of 1.5s (1.5s floor + 10 x the reference's 1 ms per call)" in message
    # Killed at its 1.5 s, not at the 60 s run limit (the rest: the worker's inputs, a loaded machine).
    assert outcome.seconds["correctness"] < RUN_LIMIT_S / 4, message


def test_slow_calls_within_their_limit_pass(job: WorkerJob, products: dict[str, str], tmp_path: Path) -> None:
    """Each call gets its own limit: ten calls of 0.3 s pass, though together they take longer than
    one call may."""
    outcome = run_job(job, _run(products["slow"]), timeout_s=120, workdir=tmp_path, run_limit_s=RUN_LIMIT_S)
    assert outcome.passed, outcome.message
    timing = outcome.candidate_timing
    assert timing is not None and timing.median_ms >= SLEEP_MS
    assert outcome.killed_by is None
    calls = 4 + 1 + timing.trials  # correctness, warm-up, timed
    assert LIMIT is not None and calls * SLEEP_MS / 1e3 > LIMIT.seconds


def test_a_hang_in_the_timed_trials_is_killed_at_the_call_limit(
    job: WorkerJob, products: dict[str, str], tmp_path: Path
) -> None:
    """In the warm-up and the trials a call's limit comes from the candidate's own earlier calls there
    when they were faster than the basis: a slow reference (1 s per call: 11.5 s a call) does not make
    a hang in the trials cost 11.5 s."""
    slow_reference = call_limit(floor_s=1.5, factor=10.0, reference_ms=1000.0)
    assert slow_reference is not None
    outcome = run_job(
        job,
        _run(products["late_hang"], slow_reference),
        timeout_s=120,
        workdir=tmp_path,
        run_limit_s=RUN_LIMIT_S,
    )
    assert outcome.error is ErrorKind.TIMEOUT and outcome.stage == "timing"
    assert outcome.killed_by == "call"
    message = outcome.message
    found = re.search(r"during timing: timed call 2 ran longer than its call limit of ([0-9.]+)s", message)
    # 1.5 s + 10 x the candidate's own few milliseconds per call, not 1.5 s + 10 x 1 s.
    assert found is not None and float(found.group(1)) < 2.5, message
    assert "its own slowest so far in these trials; the reference's: 1e+03 ms)" in message
    # From the hand-over: the correctness calls, then 1.5 s of the hanging call (11.5 s without
    # the candidate's own times).
    assert outcome.seconds["timing"] < slow_reference.seconds, message


def test_without_a_measured_time_per_call_only_the_run_limit_applies(
    job: WorkerJob, products: dict[str, str], tmp_path: Path
) -> None:
    assert call_limit(floor_s=1.5, factor=10.0) is None
    outcome = run_job(job, _run(products["hang"], None), timeout_s=120, workdir=tmp_path, run_limit_s=3.0)
    assert outcome.error is ErrorKind.TIMEOUT and outcome.killed_by == "run"
    assert "(run limit 3.0s)" in outcome.message and "call limit" not in outcome.message


def test_the_evaluator_gives_each_call_its_limit(tmp_path: Path) -> None:
    """Through the evaluator (nvcc-compiled host candidate, reference timed by its worker): the verdict
    says that the call limit stopped the hang, and what that limit was derived from."""
    settings = ExecutorSettings(
        cache_dir=tmp_path,
        runtime="host",
        run_timeout_s=120,
        run_limit_floor_s=RUN_LIMIT_S,
        run_call_floor_s=1.0,
        prewarm_workers=False,  # one evaluation: no spare or prepared workers, killed unused at the close
    )
    # The static checks want a kernel launch in a candidate (one that is never reached) and no unistd.h.
    stub = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
    source = CANDIDATES["hang"].replace("#include <unistd.h>\n", "") + stub
    evaluator = Evaluator(settings)
    try:
        started = time.monotonic()
        verdict = evaluator.evaluate(load_task(TASKS_DIR / "saxpy"), CandidateSource(source=source), OPTIONS)
        took = time.monotonic() - started
    finally:
        evaluator.close()
    assert verdict.error is ErrorKind.TIMEOUT and verdict.reward == -1.0, verdict.message
    limit = verdict.run_limit
    assert limit is not None and limit.seconds == RUN_LIMIT_S and limit.stopped_by == "call"
    assert limit.call is not None and limit.call.basis == "reference" and limit.call.floor_s == 1.0
    assert limit.call.seconds == pytest.approx(1.0 + 10 * limit.call.basis_ms / 1e3)
    assert "ran longer than its call limit" in verdict.message and "the reference's" in verdict.message
    assert took < RUN_LIMIT_S, verdict.message


@pytest.mark.timeout(120)
def test_a_candidate_that_fakes_the_announcements_still_meets_the_run_limit(
    job: WorkerJob, products: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate runs in the worker's process and can write on the pipe itself: ending its call
    over and over evades the call limit, but neither extends the run limit nor keeps the parent so busy
    reading that it misses it."""
    use_worker_process(monkeypatch)  # its worker's process, whose done channel it writes
    outcome = run_job(job, _run(products["fake_ends"]), timeout_s=60, workdir=tmp_path, run_limit_s=3.0)
    assert outcome.error is ErrorKind.TIMEOUT and outcome.killed_by == "run", outcome.message
    assert "(run limit 3.0s)" in outcome.message
    # 3.5-3.8 s here; a parent that read the pipe until it was empty took 23-84 s.
    assert outcome.seconds["run"] < 15, outcome.message
