"""The naive baseline is timed by a worker that loads no candidate's code (executor.baseline; issue 33).

Until this was fixed, a function task's ``naive.cu`` was timed inside the candidate's worker, after the
candidate's trials, in the process that had loaded the candidate's library; the timing was then kept
in the evaluator's memory and, for 24 h, on disk for every executor of the host. A library that, once
loaded, slows what runs after it in its process (here: a constructor that changes the process's
floating-point rounding; on a GPU it could be an allocator setting, a device flag, a busy thread)
inflated its own baseline speedup and planted a slow baseline that the task's later, honest
candidates were measured against.

The task's ``naive.cu`` here is the test's detector: in a process whose rounding mode was changed, each
of its calls takes 50 ms more (otherwise about 0.1 ms). So a baseline timing below 10 ms cannot have
come from the attacker's process, whatever the machine's load. Run through the evaluator on the host
runtime with ``host_baseline`` on (the GPU runtime takes the same path: tests/gpu/test_baseline_worker_gpu.py).
Also: one baseline worker per task (not per evaluation), the kept record names its source, and
``baseline_copies_ahead`` decides where the baseline worker makes its copies.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from executor import baseline
from executor.basetiming import BASELINE_WORKER, baseline_key
from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource
from executor.reference import build_reference
from executor.sandbox import WorkerPool
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, parse_task
from executor.worker.messages import BaselineOutcome
from tests.support.hostcode import (
    FAST,
    build_host_candidates,
    one_input_task,
    timing_set_job,
    use_default_candidate_process,
    use_worker_process,
)

OPTIONS = FAST.model_copy(update={"baseline": True, "min_trials": 5, "max_trials": 9})
# What a function task's source must hold besides its entry (a kernel it could launch).
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
HEAD = 'extern "C" void twice(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"  # exact in every rounding mode
DETECTOR_MS = 50
# The test's naive.cu: the honest loop, 50 ms slower in a process whose rounding mode was changed.
NAIVE = (
    "#include <cfenv>\n#include <chrono>\n" + HEAD + "if (std::fegetround() != FE_TONEAREST) {\n"
    f"  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds({DETECTOR_MS});\n"
    "  while (std::chrono::steady_clock::now() < until) {}\n}\n" + BODY + " }\n"
)
HONEST = HEAD + BODY + " }" + STUB
# Changes its process's rounding when its library is loaded (a namespace-scope initialiser), then
# computes honestly: everything that runs after it in its process sees the change.
ATTACKER = "#include <cfenv>\nstatic const int changed = std::fesetround(FE_UPWARD);\n" + HONEST
# Far below the detector's 50 ms: no timing this low was taken in the attacker's process.
CLEAN_MS = 10.0


def _task(naive: str = NAIVE) -> FunctionTask | KernelTask:
    spec = one_input_task("twice", domain="elementwise", description="y[i] = 2 x[i]", timing=65536)
    return parse_task({**spec, "reference_source": HEAD + BODY + " }", "naive_source": naive})


def _settings(cache: Path, **more: object) -> ExecutorSettings:
    """The host runtime with baselines timed (skips where there is no nvcc to build them)."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    fields = {"runtime": "host", "run_timeout_s": 120, "host_baseline": True, "prepare_next": False, **more}
    return ExecutorSettings.model_validate({"cache_dir": cache, **fields})


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    built = Evaluator(_settings(tmp_path_factory.mktemp("baseline-worker") / "cache"))
    try:
        yield built
    finally:
        built.close()


def test_a_candidate_that_slows_its_process_plants_no_slow_baseline(evaluator: Evaluator) -> None:
    task = _task()
    attacked = evaluator.evaluate(task, CandidateSource(source=ATTACKER), OPTIONS)
    assert attacked.passed, attacked.message
    # its own baseline speedup is measured against a baseline timed where its library never was
    assert attacked.baseline_timing is not None and attacked.baseline_speedup is not None
    assert attacked.baseline_timing.median_ms < CLEAN_MS, attacked.baseline_timing
    assert "baseline_timing" in attacked.seconds  # timed beside the task's first evaluation

    record = (
        evaluator.settings.cache_dir / "baseline-timings" / "host-cpu" / f"{baseline_key(task, OPTIONS)}.json"
    )
    kept = json.loads(record.read_text())
    assert kept["source"] == BASELINE_WORKER
    assert kept["timing"]["median_ms"] == attacked.baseline_timing.median_ms
    assert "baseline_copies" not in kept["seconds"]  # baseline_copies_ahead: made while naive.cu built

    # the task's next candidate, honest, is measured against that same clean timing, with no new worker
    honest = evaluator.evaluate(task, CandidateSource(source=HONEST), OPTIONS)
    assert honest.passed, honest.message
    assert honest.baseline_timing == attacked.baseline_timing
    assert "baseline_timing" not in honest.seconds and "baseline_wait" not in honest.seconds
    assert sum(k == baseline_key(task, OPTIONS) for k in evaluator._baseline_runs) == 1


def test_preparing_a_task_measures_its_baseline_before_its_first_candidate(evaluator: Evaluator) -> None:
    """``prepare_task`` (a job that knows its task, ``POST /v1/prepare``) starts the baseline's worker
    too; the task's first candidate joins that measurement rather than starting another."""
    task = _task(NAIVE + "// prepared ahead\n")
    record = (
        evaluator.settings.cache_dir / "baseline-timings" / "host-cpu" / f"{baseline_key(task, OPTIONS)}.json"
    )
    preparing = evaluator.prepare_task(task, OPTIONS)
    assert preparing is not None
    preparing.result(timeout=120)
    with evaluator._baseline_lock:
        ((measuring, _),) = [evaluator._baseline_runs[baseline_key(task, OPTIONS)]]
    outcome = measuring.result(timeout=120)
    assert outcome.ok, outcome.message
    assert json.loads(record.read_text())["source"] == BASELINE_WORKER  # before any candidate
    # kept for these timing options only: other options are another measurement
    assert evaluator._cached_timing("baseline", task, OPTIONS) == outcome.timing
    assert evaluator._cached_timing("baseline", task, OPTIONS.model_copy(update={"max_trials": 11})) is None
    first = evaluator.evaluate(task, CandidateSource(source=HONEST + "// first\n"), OPTIONS)
    assert first.passed, first.message
    assert first.baseline_timing == outcome.timing
    assert "baseline_timing" not in first.seconds  # its trials were the preparation's


def test_the_baselines_run_takes_the_gpus_turn(evaluator: Evaluator) -> None:
    """The baseline's run waits for the evaluator's GPU turn, as a function candidate's does: its trials'
    locks and a kernel run's are taken in opposite orders, and only the turn keeps the two apart (two
    processes holding one turnstile each, waiting for the other's, never end)."""
    task = _task(NAIVE + "// turn\n")
    reference = build_reference(task, evaluator.settings.cache_dir)
    with evaluator.turns.turn("kernel"):  # a kernel candidate's run holds the GPU
        measuring = evaluator._measure_baseline(task, OPTIONS, "host", reference)
        assert measuring is not None
        deadline = time.monotonic() + 60
        while evaluator.turns.waiting() != ["function"]:
            assert time.monotonic() < deadline, "the baseline's run never asked for the GPU's turn"
            time.sleep(0.05)
        assert not measuring[0].done()
        # as an urgent run: verdicts wait for it, so it goes before the candidates' runs waiting
        assert [w.urgent for w in evaluator.turns._waiting] == [True]
    outcome = measuring[0].result(timeout=120)
    assert outcome.ok, outcome.message
    assert outcome.timing is not None and outcome.timing.median_ms < CLEAN_MS


def test_a_naive_cu_that_does_not_compile_is_not_measured_again(evaluator: Evaluator) -> None:
    task = _task(HEAD + "this is not C++ }")
    reference = build_reference(task, evaluator.settings.cache_dir)
    first = evaluator._measure_baseline(task, OPTIONS, "host", reference)
    assert first is not None
    outcome = first[0].result(timeout=120)
    assert not outcome.ok and outcome.message == baseline.NOT_BUILT
    key = baseline_key(task, OPTIONS)
    with evaluator._baseline_lock:  # as if the retry delay had passed
        evaluator._baseline_runs[key] = (first[0], time.monotonic() - 2 * baseline.RETRY_AFTER_S)
    again = evaluator._measure_baseline(task, OPTIONS, "host", reference)
    assert again is not None and again[0] is first[0] and again[1] is False


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    crash = HEAD + "if (n > 0) __builtin_trap(); }"
    # An inline task's naive.cu is its caller's code: in the worker's process, it puts a FIFO where the
    # worker's result goes (its working directory) and ends the worker (review 41 H1's rest).
    fifo = "#include <sys/stat.h>\n#include <unistd.h>\n" + HEAD + 'mkfifo("result.json", 0666); _exit(1); }'
    return build_host_candidates(
        tmp_path_factory.mktemp("naive-builds"), {"naive": NAIVE, "crash": crash, "fifo": fifo}
    )


def _measure_alone(
    pool: WorkerPool, tmp_path: Path, product: str | None, ahead: bool = True
) -> BaselineOutcome:
    """The baseline worker alone (no evaluator) on the test task's timing sets, with ``product`` as
    the build of its naive.cu (None: it did not compile)."""
    job = timing_set_job(_task(), tmp_path, OPTIONS, baseline_copies=ahead)
    return baseline.measure(pool, job, lambda: product, 120)


@pytest.mark.parametrize("ahead", [True, False])
def test_the_baseline_worker_makes_its_copies_where_the_knob_says(
    products: dict[str, str], tmp_path: Path, ahead: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The executor's default (a runner here, on shared mappings): copies made in the run were not shared
    # until session 37 (the baseline worker failed an assertion and exited 1).
    use_default_candidate_process(monkeypatch)
    pool = WorkerPool("host", prewarm=False)
    try:
        outcome = _measure_alone(pool, tmp_path, products["naive"], ahead)
    finally:
        pool.close()
    assert outcome.ok, outcome.message
    assert outcome.device == "host-cpu" and outcome.timing is not None
    assert outcome.timing.trials >= 2 * OPTIONS.timing_sets + 1  # the candidates' trials, on every set
    assert outcome.timing.median_ms < CLEAN_MS
    assert ("baseline_copies" in outcome.seconds) is not ahead  # made in its run, under the trials' lock


def test_a_baseline_that_crashes_or_does_not_build_is_an_outcome(
    products: dict[str, str], tmp_path: Path
) -> None:
    pool = WorkerPool("host", prewarm=False)
    try:
        crashed = _measure_alone(pool, tmp_path, products["crash"])
        unbuilt = _measure_alone(pool, tmp_path, None)
    finally:
        pool.close()
    assert not crashed.ok and crashed.timing is None and "during baseline" in crashed.message, crashed.message
    assert not unbuilt.ok and "does not compile" in unbuilt.message


def test_a_baseline_that_leaves_a_fifo_as_its_result_does_not_hold_the_executor(
    products: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor read the baseline worker's result by name: a FIFO there blocked the measurement's
    thread (and the evaluations waiting for the baseline) for as long as nothing wrote to it. A result
    that is not a plain file is no result: the measurement ends with the worker's exit."""
    use_worker_process(monkeypatch)  # the naive code in the worker's process, where the FIFO is made
    pool = WorkerPool("host", prewarm=False)
    done: list[BaselineOutcome] = []
    measuring = threading.Thread(
        target=lambda: done.append(_measure_alone(pool, tmp_path, products["fifo"])), daemon=True
    )
    try:
        measuring.start()
        measuring.join(60)
        blocked = measuring.is_alive()
        if blocked:  # free the thread: open the FIFO for writing
            for fifo in Path(tempfile.gettempdir()).glob("regraph-workers-*/*/result.json"):
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            measuring.join(10)
    finally:
        pool.close()
    assert not blocked, "the baseline's measurement was still blocked after 60 s"
    (outcome,) = done
    assert not outcome.ok and outcome.timing is None and "during baseline" in outcome.message, outcome.message


def test_a_kept_baseline_is_measured_again_once_it_is_stale(tmp_path: Path) -> None:
    """A long-running executor does not keep a baseline timing in memory longer than the host's store
    keeps it (``baseline_timing_max_age_s``): once stale, the task's next evaluation measures it again."""
    max_age_s = 3.0
    # baseline measurements only (their own workers): no spares, which would be killed unused
    settings = _settings(tmp_path / "cache", baseline_timing_max_age_s=max_age_s, prewarm_workers=False)
    evaluator = Evaluator(settings)
    try:
        task = _task(NAIVE + "// stale\n")
        reference = build_reference(task, settings.cache_dir)
        first = evaluator._measure_baseline(task, OPTIONS, "host", reference)
        assert first is not None and first[1] is True
        outcome = first[0].result(timeout=120)
        kept_at = time.monotonic()
        assert outcome.ok, outcome.message
        assert evaluator._cached_timing("baseline", task, OPTIONS) == outcome.timing
        # still fresh: the same measurement is joined, no new one
        joined = evaluator._measure_baseline(task, OPTIONS, "host", reference)
        assert joined is None or joined[0] is first[0]
        time.sleep(max(0.0, kept_at + max_age_s + 0.2 - time.monotonic()))
        assert evaluator._cached_timing("baseline", task, OPTIONS) is None
        # a verdict whose evaluation began while the timing was kept still gets it
        kept = outcome.timing
        assert kept is not None
        assert evaluator._baseline_timing(task, OPTIONS, "host", None, {}, None, (kept, None)) == kept
        # and a job that knows its task (prepare_task) has it measured again ahead of its candidates
        assert evaluator._baseline_unknown(task, OPTIONS)
        again = evaluator._measure_baseline(task, OPTIONS, "host", reference)
        assert again is not None and again[1] is True and again[0] is not first[0]
        remeasured = again[0].result(timeout=120)
        assert remeasured.ok, remeasured.message
        assert evaluator._cached_timing("baseline", task, OPTIONS) == remeasured.timing
    finally:
        evaluator.close()


def test_a_restarted_executor_finds_the_stored_baseline_before_its_first_verdict(tmp_path: Path) -> None:
    """The host's stored baseline timings are keyed by the device's model, which an executor used to
    learn only from its first run's outcome: after a restart, a task prepared before the first verdict
    timed its baseline again. The device's figures (measured by a worker of their own) name the model,
    so the restarted executor finds the stored timing at once."""
    settings = _settings(tmp_path / "cache", prewarm_workers=False)  # no evaluation: no spares
    task = _task(NAIVE + "// restarted\n")
    before = Evaluator(settings)
    try:
        reference = build_reference(task, settings.cache_dir)
        measuring = before._measure_baseline(task, OPTIONS, "host", reference)
        assert measuring is not None
        outcome = measuring[0].result(timeout=120)
        assert outcome.ok and outcome.timing is not None, outcome.message
    finally:
        before.close()
    after = Evaluator(settings)  # the same host's cache, a new process's evaluator: no run yet
    try:
        assert after._measure_baseline(task, OPTIONS, "host", reference) is None  # nothing to measure
        assert after._cached_timing("baseline", task, OPTIONS) == outcome.timing
        assert not after._baseline_runs
    finally:
        after.close()


def test_a_retry_after_a_failed_baseline_waits_its_turn_as_the_candidates_do(evaluator: Evaluator) -> None:
    """A first measurement is an urgent turn (verdicts wait for it); a retry after a failure is not: it
    may fail again, holding the GPU up to the run limit, ahead of candidates that wait for nothing of it."""
    task = _task(HEAD + "if (n > 0) __builtin_trap(); }\n// retried\n")
    reference = build_reference(task, evaluator.settings.cache_dir)
    first = evaluator._measure_baseline(task, OPTIONS, "host", reference)
    assert first is not None
    failed = first[0].result(timeout=120)
    assert not failed.ok and failed.message != baseline.NOT_BUILT, failed.message
    with evaluator._baseline_lock:  # as if the retry delay had passed
        evaluator._baseline_runs[baseline_key(task, OPTIONS)] = (
            first[0],
            time.monotonic() - 2 * baseline.RETRY_AFTER_S,
        )
    with evaluator.turns.turn("kernel"):  # a candidate's run holds the GPU
        again = evaluator._measure_baseline(task, OPTIONS, "host", reference)
        assert again is not None and again[1] is True
        deadline = time.monotonic() + 60
        while evaluator.turns.waiting() != ["function"]:
            assert time.monotonic() < deadline, "the retry never asked for the GPU's turn"
            time.sleep(0.05)
        assert [w.urgent for w in evaluator.turns._waiting] == [False]
    assert not again[0].result(timeout=120).ok


def test_a_lock_that_the_rlimit_refuses_every_time_is_kept_as_past_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 45 F6: on the host runtime a task whose arrays pass the workers' RLIMIT_MEMLOCK (below the
    setting's cap) had every lock refused, its baseline turned away as a failed lock and timed again
    every 300 s, forever. The rlimit is the executor's cap there: past it, the baseline is kept as
    pageable past the cap, and the task's candidates (pageable past it too) are compared with it."""
    use_worker_process(monkeypatch)  # page-locked arrays: a runner's shared mappings are left pageable
    task = _task(NAIVE + "// past the rlimit\n")
    locked = OPTIONS.model_copy(update={"host_memory": "page_locked"})
    settings = _settings(tmp_path / "cache")
    limits = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    soft = 1 << 20  # the task's timed arrays: 3 copies of x and y (256 KiB each) and a confirming set
    if limits[1] != resource.RLIM_INFINITY and limits[1] < soft:
        pytest.skip(f"RLIMIT_MEMLOCK's hard limit is {limits[1]} bytes")
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, limits[1]))  # the workers inherit it
    try:
        evaluator = Evaluator(settings)
        try:
            assert evaluator.lock_cap() == soft < settings.host_lock_max_mb << 20
            first = evaluator.evaluate(task, CandidateSource(source=HONEST), locked)
            assert first.passed, first.message
            assert first.seconds["host_lock_over_cap"] == 1.0 and first.seconds["host_page_locked"] == 0.0
            assert first.baseline_timing is not None and first.baseline_speedup is not None
            assert evaluator._kept_baseline(task, locked) == (first.baseline_timing, 0.0)
            with evaluator._baseline_lock:
                measured = evaluator._baseline_runs[baseline_key(task, locked)]
            assert not evaluator._due_again(measured[0], time.monotonic() - baseline.RETRY_AFTER_S - 1)
            second = evaluator.evaluate(task, CandidateSource(source=HONEST + "// second\n"), locked)
            assert second.passed and second.baseline_timing == first.baseline_timing, second.message
            assert "baseline_timing" not in second.seconds and second.baseline_speedup is not None
        finally:
            evaluator.close()
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, limits)


@pytest.mark.parametrize("command", ["baseline", "peak"])
def test_a_one_command_worker_is_made_as_the_pools_candidate_workers(
    command: Literal["baseline", "peak"],
) -> None:
    """The baseline's and the device peak's workers (``WorkerPool.start_command``) get the pool's
    runtime, GPU lock and timing cores, as its candidate workers do (session 30 had to add the timing
    cores to each of them by hand)."""
    pool = WorkerPool("host", prewarm=False, timing_cores=1)
    try:
        proc = pool.start_command(command)
        try:
            assert (proc.role, proc.runtime, proc.gpu_lock, proc.timing_cores) == (
                "candidate",
                pool.runtime,
                pool.gpu_lock,
                pool.timing_cores,
            )
        finally:
            proc.close()
    finally:
        pool.close()
