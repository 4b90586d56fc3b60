"""A task whose serial reference is slow, evaluated by two replicas of one host (two evaluators over one
cache) whose run limit (``run_timeout_s``) is shorter than the task's preparation: the reference is the
task's own code, and neither the replica that prepares the task nor the one that waits for it may fail
an honest candidate with ``reference_error`` because the preparation took longer than a candidate's run
may (the scaling run of session 25: median3x3_u8's preparation took 57 s with one replica, over the
60 s limit with two: "the reference was killed after 60s"). Real evaluators in the test-only ``host``
runtime and the real g++."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions, Verdict
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.support.buildcache import sharing_builds

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
# The serial reference sleeps 0.6 s per call at the timing size: a preparation (three timing sets, the
# reference timed once) and an evaluation's own sets take several seconds, more than the run limit.
SLOW_REFERENCE = (
    "#include <unistd.h>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "    if (n > 1000) usleep(600000);\n"
    "    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
)
CORRECT = (
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
    "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
)
QUICK = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)
RUN_TIMEOUT_S = 2.5


def test_two_replicas_wait_for_a_slow_preparation_instead_of_failing_honest_code(
    tmp_path: Path, shared_builds: Path
) -> None:
    task_dir = tmp_path / "saxpy"
    shutil.copytree(TASKS_DIR / "saxpy", task_dir)
    (task_dir / "reference.cpp").write_text(SLOW_REFERENCE)
    task = load_task(task_dir)
    cache = sharing_builds(tmp_path / "cache", shared_builds)
    settings = ExecutorSettings(
        cache_dir=cache, runtime="host", run_timeout_s=RUN_TIMEOUT_S, prewarm_workers=False
    )
    replicas = [Evaluator(settings), Evaluator(settings)]
    verdicts: list[Verdict | None] = [None, None]

    def evaluate(i: int) -> None:
        verdicts[i] = replicas[i].evaluate(task, CandidateSource(source=CORRECT), QUICK)

    try:
        threads = [threading.Thread(target=evaluate, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
    finally:
        for replica in replicas:
            replica.close()
    for verdict in verdicts:
        assert verdict is not None
        assert verdict.passed, (verdict.error, verdict.message, verdict.seconds)
