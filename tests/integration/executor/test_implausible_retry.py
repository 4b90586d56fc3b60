"""An ``implausible`` verdict stands as the first run gives it: the evaluator does not run the
candidate again. Session 25 ran such a refusal once more on fresh workers and let the second verdict
stand; review 25 had a candidate keep its answers in SysV shared memory across the two runs and pass
the second at 2,520x (its first was refused by the repeat-visit rule). Precision first: an honest
refusal loses one candidate, a fake pass corrupts the graph.

Real evaluators in the test-only ``host`` runtime, with the workers unjailed so that they share the
host's IPC namespace (a jailed worker has one of its own, and every run would be the first). The
candidate is disturbed in the first process that runs it only (a SysV semaphore made with IPC_EXCL
marks that one): its first call on each new buffer at the timing size spins 100 ms first; everywhere
else it is plain saxpy. The repeat-visit rule refuses that first run; a second run would pass."""

from __future__ import annotations

import ctypes
import ctypes.util
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, ErrorKind, EvaluationOptions
from executor.sandbox import JAIL_WORKERS_ENV
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.support.hostcode import FIXTURE_TASKS as TASKS_DIR
from tests.support.hostcode import STUB

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
# One copy of each timing set (the first visits come first, the rest repeat them).
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


def test_a_refusal_by_the_repeat_visit_rule_stands_without_a_second_run(
    tmp_path: Path, semaphore_key: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JAIL_WORKERS_ENV, "0")  # one IPC namespace for every worker: a rerun would pass
    task = load_task(TASKS_DIR / "saxpy")
    source = DISTURBED_ONCE.replace("KEY", str(semaphore_key))
    evaluator = Evaluator(
        ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", prewarm_workers=False)
    )
    try:
        verdict = evaluator.evaluate(task, CandidateSource(source=source), OPTIONS)
    finally:
        evaluator.close()
    assert not verdict.passed
    assert verdict.error is ErrorKind.IMPLAUSIBLE, (verdict.error, verdict.message)
    assert "refused_before_s" not in verdict.seconds
