"""The evaluator's pre-warmed and prepared workers, end to end in the test-only ``host`` runtime.

Candidates are C++ function candidates compiled by the real nvcc (an unused kernel launch keeps the
static rule that a candidate launches something satisfied) and run on the CPU by real worker
processes: spares started ahead of time, and workers prepared for the next candidate of a task.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from executor.app import create_app
from executor.client import ExecutorClient
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask
from executor.timingset import timing_seed
from executor.verdict import ErrorKind
from tests.support.buildcache import sharing_builds
from tests.support.hostcode import SAXPY_CORRECT as CORRECT
from tests.support.hostcode import SAXPY_HEAD as HEAD
from tests.support.hostcode import STUB, saxpy_timed_at
from tests.support.servers import serve_in_thread
from tests.support.workers import child_processes, worker_children

WRONG = HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] - y[i]; }" + STUB
HANG = HEAD + "volatile int spin = 1; while (spin) {} }" + STUB
SEGFAULT = HEAD + "volatile int* p = nullptr; *p = 1; }" + STUB
CACHED = (
    "#include <vector>\nstatic std::vector<float> memo;\n"
    + HEAD
    + "if (memo.empty()) { for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; memo.assign(y, y + n); }"
    " else { for (int i = 0; i < n && i < (int)memo.size(); ++i) y[i] = memo[i]; } }" + STUB
)
# Right on the five correctness calls (three test-size sets, the timing-size set, the repeat of the
# first), wrong from then on: it fails on the output of the last timed trial, on the sets timed.
LATE_WRONG = (
    HEAD + "static int calls = 0; if (++calls <= 5) { for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }"
    " else { for (int i = 0; i < n; ++i) y[i] = a * x[i] - y[i]; } }" + STUB
)
QUICK = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)
# The run limit (and each call's) of the test whose hang runs beside an honest candidate.
HANG_LIMIT_S = 6.0


def host_settings(cache_dir: Path, **fields: object) -> ExecutorSettings:
    """The ``host`` runtime with run limits no correct saxpy reaches on a loaded machine: the defaults
    (a 5 s run, 2 s a call) killed a correct candidate once while another test run shared the CPUs.
    None of these tests is about the run limits (the hang's own test sets its own)."""
    defaults: dict[str, object] = {"run_timeout_s": 60, "run_limit_floor_s": 30, "run_call_floor_s": 20}
    return ExecutorSettings.model_validate({"cache_dir": cache_dir, "runtime": "host", **defaults, **fields})


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Iterator[Evaluator]:
    # The run's builds (tests.support.buildcache): what this module's tests compile in it while they
    # look at the prewarm is a source of their own (a comment of their own), built cold; the plain
    # WRONG and CORRECT candidates, built by other tests of the run too, are built once.
    built = Evaluator(host_settings(sharing_builds(tmp_path_factory.mktemp("prewarm-cache"), shared_builds)))
    yield built
    built.close()


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    """saxpy timed at 256 Ki floats: what these tests check (which workers are prepared, started and
    stopped, the seeds, the timing set's use) does not depend on the timing size."""
    return saxpy_timed_at()


def test_repeated_candidates_pass_with_prepared_workers(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    for k in range(3):
        verdict = evaluator.evaluate(saxpy, CandidateSource(source=CORRECT + f"// variant {k}\n"), QUICK)
        assert verdict.passed, verdict.message
        assert verdict.input_sets_checked == QUICK.correctness_sets + QUICK.timing_size_checks + 1
        timing = verdict.candidate_timing
        assert timing is not None and timing.trials >= QUICK.min_trials and timing.stop is not None
        assert verdict.reference_timing is not None
        for stage in ("compile", "reference_wait", "correctness", "timing", "total"):
            assert stage in verdict.seconds


def test_every_evaluation_draws_fresh_seeds(evaluator: Evaluator, saxpy: FunctionTask | KernelTask) -> None:
    # The same candidate each time (compiled once): its evaluations still draw seeds of their own.
    seeds = set()
    for _ in range(3):
        verdict = evaluator.evaluate(saxpy, CandidateSource(source=WRONG), QUICK)
        assert verdict.error is ErrorKind.WRONG_OUTPUT and verdict.mismatch is not None
        seeds.add(verdict.mismatch.seed)
    assert len(seeds) == 3


def test_every_candidate_is_timed_on_the_task_timing_set(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    """Correctness draws fresh seeds; the trials run on the task's timing set, the same every time,
    and their last output is still checked against the reference's for it."""
    # One candidate, compiled once: each evaluation runs it in a worker of its own (its call count
    # starts again), and only the options decide where its trials' inputs come from.
    late_wrong = CandidateSource(source=LATE_WRONG)
    for _ in range(2):
        verdict = evaluator.evaluate(saxpy, late_wrong, QUICK)
        assert verdict.error is ErrorKind.WRONG_OUTPUT and verdict.stage.value == "timing"
        assert verdict.mismatch is not None and verdict.mismatch.size == "timing"
        assert verdict.mismatch.seed is None  # a timing set's seed is the executor's secret: withheld
    stored = list((evaluator.settings.cache_dir / "timing-sets").glob("*/manifest.json"))
    assert len(stored) == QUICK.timing_sets  # the task's timing sets, each from its own seed
    fresh = QUICK.model_copy(update={"timing_inputs": "fresh"})
    seeds = set()
    for _ in range(2):
        verdict = evaluator.evaluate(saxpy, late_wrong, fresh)
        assert verdict.error is ErrorKind.WRONG_OUTPUT and verdict.mismatch is not None
        # each evaluation's own set, never used again: its seed is shown
        assert verdict.stage.value == "timing" and verdict.mismatch.seed is not None
        assert verdict.mismatch.seed != timing_seed(saxpy, evaluator.timing_secret)
        seeds.add(verdict.mismatch.seed)
    assert len(seeds) == 2


def test_the_caller_waits_only_for_what_needs_the_candidate(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    """With the workers prepared ahead, the inputs and the timing set's copies are ready when the
    candidate arrives: the verdict says how long it waited for them, and the finished workers are
    torn down after the verdict."""
    evaluator.evaluate(saxpy, CandidateSource(source=CORRECT + "// prepares the next\n"), QUICK)
    evaluator.wait_for_preparation()
    verdict = evaluator.evaluate(saxpy, CandidateSource(source=CORRECT + "// prepared\n"), QUICK)
    assert verdict.passed, verdict.message
    for stage in ("inputs", "timing_inputs", "inputs_wait", "reap_wait", "run", "total"):
        assert stage in verdict.seconds, stage
    assert verdict.seconds["inputs_wait"] < 0.05  # prepared while this candidate compiled


def test_a_cached_answer_is_caught_with_prepared_inputs(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    verdict = evaluator.evaluate(saxpy, CandidateSource(source=CACHED), QUICK)
    assert not verdict.passed and verdict.error is ErrorKind.WRONG_OUTPUT


def test_a_crash_costs_only_its_own_worker(evaluator: Evaluator, saxpy: FunctionTask | KernelTask) -> None:
    crashed = evaluator.evaluate(saxpy, CandidateSource(source=SEGFAULT), QUICK)
    assert crashed.error is ErrorKind.CRASH and "SIGSEGV" in crashed.message
    after = evaluator.evaluate(saxpy, CandidateSource(source=CORRECT + "// after the crash\n"), QUICK)
    assert after.passed, after.message


def test_other_options_do_not_reuse_prepared_workers(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    more_sets = QUICK.model_copy(update={"correctness_sets": 5})
    verdict = evaluator.evaluate(saxpy, CandidateSource(source=CORRECT + "// other options\n"), more_sets)
    assert verdict.passed, verdict.message
    assert verdict.input_sets_checked == 5 + QUICK.timing_size_checks + 1


def test_closing_stops_every_spare(
    evaluator: Evaluator, tmp_path: Path, shared_builds: Path, saxpy: FunctionTask | KernelTask
) -> None:
    settings = host_settings(sharing_builds(tmp_path, shared_builds))
    # The module's evaluator prepares its next evaluation in the background; let it finish first.
    evaluator.wait_for_preparation()
    # By pid, whatever each child runs: a spare the module's evaluator started a moment ago may not
    # show its command line yet, and would otherwise look like one this evaluator left behind.
    before = child_processes()
    own = Evaluator(settings)
    verdict = own.evaluate(saxpy, CandidateSource(source=CORRECT), QUICK)
    assert verdict.passed, verdict.message
    own.wait_for_preparation()
    started = child_processes() - before
    assert set(worker_children()) & started  # spares and a prepared pair are waiting
    own.close()
    assert not child_processes() & started  # every process it started is gone, not only the workers
    assert not set(worker_children()) - before


def test_without_prewarming_the_same_verdicts_come_back(
    tmp_path: Path, shared_builds: Path, saxpy: FunctionTask | KernelTask
) -> None:
    settings = host_settings(sharing_builds(tmp_path, shared_builds), prewarm_workers=False)
    cold = Evaluator(settings)
    before = child_processes()
    try:
        assert cold.evaluate(saxpy, CandidateSource(source=CORRECT), QUICK).passed
        assert cold.evaluate(saxpy, CandidateSource(source=WRONG), QUICK).error is ErrorKind.WRONG_OUTPUT
        # Nothing is left waiting once the finished workers, killed after their verdicts, are gone
        # (the reaper waits for that in the background: a process still exiting is seen in /proc).
        assert cold.pool.drain(timeout_s=30.0)
        assert not set(worker_children()) - before
    finally:
        cold.close()


def test_a_task_prepared_ahead_gives_its_first_candidate_its_timing_set_and_reference_timing(
    tmp_path: Path, saxpy: FunctionTask | KernelTask
) -> None:
    settings = host_settings(tmp_path)
    own = Evaluator(settings)
    try:
        ahead = own.prepare_task(saxpy, QUICK)
        assert ahead is not None
        assert own.prepare_task(saxpy, QUICK) is None  # once per task
        # The first candidate arrives while the task is being prepared: it waits for that work
        # instead of doing it again, and its reference worker only runs the fresh sets.
        verdict = own.evaluate(saxpy, CandidateSource(source=CORRECT + "// prepared\n"), QUICK)
        assert ahead.done()
        assert verdict.passed, verdict.message
        assert "task_prepare_wait" in verdict.seconds
        assert "timing_set" not in verdict.seconds and "reference_timing" not in verdict.seconds
        assert verdict.reference_timing is not None and verdict.speedup is not None
        assert own.run_limit(saxpy, QUICK).basis != "cap"  # the reference's time was known before the run
    finally:
        own.close()


def test_only_an_evaluation_that_leaves_the_executor_idle_prepares_the_next(
    tmp_path: Path, saxpy: FunctionTask | KernelTask
) -> None:
    """Workers for a next candidate are prepared when the executor would otherwise be idle (one
    caller after another, as a search waiting for its model), not while other evaluations are in
    flight, where the next request may be any task's and the prepared pair would be stopped unused."""
    # The hang runs for its whole run limit (no call limit before it): the two evaluations are in flight
    # together from their submission (each compiles first), so the limit only has to let the honest
    # one beside it pass on a loaded machine (its run: 0.5-1.3 s at load 12). 12 s before session 30.
    settings = ExecutorSettings(
        cache_dir=tmp_path,
        runtime="host",
        run_timeout_s=30,
        run_limit_floor_s=HANG_LIMIT_S,
        run_call_floor_s=HANG_LIMIT_S,
    )
    own = Evaluator(settings)
    try:
        with ThreadPoolExecutor(max_workers=2) as side:
            hung = side.submit(own.evaluate, saxpy, CandidateSource(source=HANG), QUICK)
            beside = side.submit(own.evaluate, saxpy, CandidateSource(source=CORRECT + "// beside\n"), QUICK)
            deadline = time.monotonic() + 30
            while own.in_flight < 2 and time.monotonic() < deadline:
                time.sleep(0.005)
            # Both were under way at once (the hang runs to its limit): whichever ends first ends
            # beside the other, and only the one that ends alone leaves the executor idle.
            assert own.in_flight == 2, "the two evaluations never ran at the same time"
            assert beside.result(timeout=120).passed
            assert hung.result(timeout=120).error is ErrorKind.TIMEOUT
        assert own.prepares_started == 1
        own.wait_for_preparation()
        alone = own.evaluate(saxpy, CandidateSource(source=CORRECT + "// alone\n"), QUICK)
        assert alone.passed, alone.message
        assert own.prepares_started == 2
    finally:
        own.close()


@pytest.mark.parametrize("prepare", [True, False])
def test_the_executor_service_prepares_a_task_new_to_it(
    tmp_path: Path, saxpy: FunctionTask | KernelTask, prepare: bool
) -> None:
    """The single executor's API starts a new task's preparation (reference build, timing set,
    reference timing) when its first request arrives, and that request's evaluation waits for it
    instead of doing the work itself; with ``prepare_tasks`` off the evaluation does it."""
    settings = host_settings(tmp_path, prepare_tasks=prepare)
    with serve_in_thread(create_app(settings)) as url, ExecutorClient(url, timeout_s=300) as client:
        verdict = client.evaluate(saxpy, CORRECT + "// first of its task\n", QUICK)
    assert verdict.passed, verdict.message
    assert verdict.reference_timing is not None
    if prepare:
        assert "timing_set" not in verdict.seconds and "reference_timing" not in verdict.seconds
    else:
        assert "timing_set" in verdict.seconds and "reference_timing" in verdict.seconds


def test_a_function_tasks_trials_wait_for_a_teardown_and_its_checks_do_not(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    """A finished worker still being torn down when a function task's candidate runs: the untimed
    checks go on beside the teardown, the host-timed trials start only once it is over."""
    source = CandidateSource(source=CORRECT + "// beside a teardown\n")
    assert evaluator.evaluate(saxpy, source, QUICK).passed  # compiled and cached: the next is quick
    evaluator.wait_for_preparation()
    slow = evaluator.pool.take("candidate")
    for k in range(80_000):  # removing its directory takes the teardown most of a second
        (slow.dir / f"f{k}").touch()
    evaluator.pool.discard(slow)
    verdict = evaluator.evaluate(saxpy, source, QUICK)
    assert verdict.passed, verdict.message
    seconds = verdict.seconds
    assert seconds["reap_wait"] > 0.3, seconds  # the teardown was still going when the run began
    assert seconds["run_lock_wait"] < seconds["reap_wait"] / 2, seconds  # the checks did not wait
    # From the hand-over to the trials: the checks, then the wait for the trials' own lock. The
    # teardown began (and was held for) before the hand-over, so this outlasts it.
    to_trials = seconds["handover"] + seconds["load"] + seconds["correctness"] + seconds["timing_lock_wait"]
    assert to_trials >= seconds["reap_wait"] - 0.05, seconds
