"""A candidate cannot set the serial reference's timing that its task's speedups are computed from
(review 22, finding 8).

The candidate worker runs the candidate's code, and a candidate that reaches the interpreter there
(through ``dlsym``, which its library may import: the link check refuses Python API names, not the
loader's) can rewrite what the worker reports. The evaluator used to keep the reference timing that
the candidate's outcome carried, and computed the speedup from it: one candidate multiplied it by a
thousand and every later candidate of the task on that executor got a thousand times its speedup.
Now the evaluator takes it from a reference worker only and hands its own copy to the verdict; the
candidate worker times no reference at all.

Through the evaluator on the host runtime (the compile needs nvcc; the host runtime runs the library).
The candidate here still runs Python in the worker: that hole (a candidate process that holds no
checker) is open, and documented in docs/executor.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource
from executor.taskformat import load_task
from tests.support.hostcode import FAST, host_evaluator, use_worker_process

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
OPTIONS = FAST.model_copy(update={"min_trials": 5, "max_trials": 9})
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
SAXPY = "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];"
HONEST = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { ' + SAXPY + " }" + STUB
# What the candidate runs in the worker's interpreter: the outcome's reference timing a thousand times
# slower, and a mark in its seconds that shows the rewrite ran.
REWRITE = (
    "import executor.worker.candidate as c\\n"
    "timing = c.Worker.timing\\n"
    "def slower(self, *a, **k):\\n"
    "    out = timing(self, *a, **k)\\n"
    "    r = out.reference_timing\\n"
    "    seconds = dict(out.seconds, rewritten=1.0)\\n"
    "    if r is not None:\\n"
    "        r = r.model_copy(update={'median_ms': r.median_ms * 1000})\\n"
    "    return out.model_copy(update={'reference_timing': r, 'seconds': seconds})\\n"
    "c.Worker.timing = slower\\n"
)
REWRITER = (
    "#define J(a, b) a##b\n"
    'extern "C" void* J(dl, sym)(void*, const char*);\n'
    "typedef int (*ensure_t)(void);\ntypedef void (*release_t)(int);\ntypedef int (*run_t)(const char*);\n"
    "static bool done = false;\n"
    "static void rewrite() {\n"
    "    done = true;\n"
    '    ensure_t ensure = (ensure_t)J(dl, sym)(0, "PyGILState_Ensure");\n'
    '    release_t release = (release_t)J(dl, sym)(0, "PyGILState_Release");\n'
    '    run_t run = (run_t)J(dl, sym)(0, "PyRun_SimpleString");\n'
    "    if (!ensure || !release || !run) return;\n"
    "    int held = ensure();\n"
    f'    run("{REWRITE}");\n'
    "    release(held);\n"
    "}\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    f"    if (!done) rewrite();\n    {SAXPY}\n}}\n" + STUB
)


@pytest.fixture
def evaluator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Evaluator]:
    # In its worker's process (its spares too): a runner's candidate cannot reach its worker's result.
    use_worker_process(monkeypatch)
    with host_evaluator(tmp_path / "cache") as built:
        yield built


def test_a_candidate_that_rewrites_its_outcome_does_not_set_the_reference_timing(
    evaluator: Evaluator,
) -> None:
    task = load_task(TASKS_DIR / "saxpy")
    first = evaluator.evaluate(task, CandidateSource(source=HONEST), OPTIONS)
    assert first.passed and first.reference_timing is not None, first.message
    trusted = first.reference_timing.median_ms
    rewriter = evaluator.evaluate(task, CandidateSource(source=REWRITER), OPTIONS)
    assert rewriter.passed, rewriter.message
    assert rewriter.seconds.get("rewritten") == 1.0, "the rewrite did not run: this test shows nothing"
    after = evaluator.evaluate(task, CandidateSource(source=HONEST + "\n// again\n"), OPTIONS)
    for verdict in (rewriter, after):
        assert verdict.reference_timing is not None and verdict.reference_timing.median_ms == trusted
        assert verdict.candidate_timing is not None and verdict.speedup is not None
        assert verdict.speedup == pytest.approx(trusted / verdict.candidate_timing.median_ms)
