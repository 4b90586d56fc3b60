"""Workers outlive the thread that started them (test-only ``host`` runtime, no GPU).

A worker is started with a parent-death signal (SIGKILL), and Linux sends it when the *thread* that
forked the worker ends, not the process. A spare started by one evaluation's caller thread (a
request's thread, a thread of the test) was killed when that thread ended, under the evaluation that
had taken it meanwhile: an honest candidate got ``crash`` "worker died from SIGKILL" (seen by review
24a with two evaluations at once, different options, ``prepare_next`` on)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.sandbox import WorkerProcess
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import Verdict
from tests.support.buildcache import sharing_builds
from tests.support.hostcode import FIXTURE_TASKS as TASKS_DIR
from tests.support.hostcode import SAXPY_CORRECT as CORRECT

OPTIONS = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)


def test_a_worker_started_by_a_thread_that_has_ended_stays_alive(tmp_path: Path) -> None:
    started: list[WorkerProcess] = []
    thread = threading.Thread(target=lambda: started.append(WorkerProcess("candidate", "host", tmp_path)))
    thread.start()
    thread.join()
    (proc,) = started
    try:
        time.sleep(0.5)
        assert proc.alive, f"the worker died when its starting thread ended: {proc.proc.returncode}"
    finally:
        proc.close()


def test_two_evaluations_at_once_with_different_options_both_pass(
    tmp_path: Path, shared_builds: Path
) -> None:
    settings = ExecutorSettings(
        cache_dir=sharing_builds(tmp_path, shared_builds),
        runtime="host",
        run_timeout_s=60,
        run_limit_floor_s=30,
        run_call_floor_s=20,
        prepare_next=True,
        prewarm_workers=True,
    )
    task = load_task(TASKS_DIR / "saxpy")
    evaluator = Evaluator(settings)
    try:
        # the reference timed, a spare started by this thread, a pair prepared for OPTIONS
        assert evaluator.evaluate(task, CandidateSource(source=CORRECT), OPTIONS).passed
        verdicts: dict[str, Verdict] = {}
        other = OPTIONS.model_copy(update={"max_trials": 12})

        def first() -> None:
            # the prepared pair is for OPTIONS: stopped, and this thread starts a new pair and a spare
            verdicts["first"] = evaluator.evaluate(task, CandidateSource(source=CORRECT + "// a\n"), other)

        def second() -> None:
            while not evaluator.turns.locked() and "first" not in verdicts:
                time.sleep(0.001)
            # takes the spare that the first thread started, which ends before this evaluation does
            verdicts["second"] = evaluator.evaluate(task, CandidateSource(source=CORRECT + "// b\n"), OPTIONS)

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for name, verdict in verdicts.items():
            assert verdict.passed, f"{name}: {verdict.error} {verdict.message}"
    finally:
        evaluator.close()
