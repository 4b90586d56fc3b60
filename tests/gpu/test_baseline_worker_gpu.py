"""On the GPU, the naive baseline is timed by a worker that loads no candidate's code (executor.baseline;
issue 33), as on the host runtime (tests/integration/executor/test_baseline_worker_host.py, which
explains the attack): a candidate whose library changes its process's floating-point rounding when it
is loaded, against a ``naive.cu`` that is 200 ms slower in such a process, gets (and leaves for the
task's later candidates) a baseline timed where its library never was; the kept record names the
baseline worker and the GPU's model; the task's next candidate starts no second worker.

Run on the GPU machine: ``python -m pytest tests/gpu/test_baseline_worker_gpu.py -q -m gpu`` (two
evaluations, one baseline worker: some 20 s with the builds).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.basetiming import BASELINE_WORKER, baseline_key
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

TASKS = Path(__file__).parents[1] / "unit" / "executor" / "fixtures" / "tasks"
QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1)
DETECTOR_MS = 200
# Far below the detector: no trial this fast ran in a process with the attacker's library.
CLEAN_MS = 50.0
# The fixture's naive.cu is the honest code here; the task's naive.cu is the same with the test's detector.
HONEST = (TASKS / "saxpy" / "naive.cu").read_text()
DETECT = (
    "#include <cfenv>\n#include <chrono>\n"
    "static void detect() {\n  if (std::fegetround() == FE_TONEAREST) return;\n"
    f"  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds({DETECTOR_MS});\n"
    "  while (std::chrono::steady_clock::now() < until) {}\n}\n"
)
NAIVE = DETECT + HONEST.replace("    float *dx, *dy;", "    detect();\n    float *dx, *dy;")
ATTACKER = "#include <cfenv>\nstatic const int changed = std::fesetround(FE_UPWARD);\n" + HONEST


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("gpu-baseline") / "cache", runtime="gpu", run_timeout_s=120
    )
    built = Evaluator(settings)
    yield built
    built.close()


@pytest.fixture(scope="module")
def task() -> FunctionTask | KernelTask:
    assert "detect();" in NAIVE
    saxpy = load_task(TASKS / "saxpy")
    # a task of its own (its timing sets and baseline keyed apart from the fixture's), small enough
    # that the clean baseline is far below the detector's 200 ms
    params = {"n": saxpy.params["n"].model_copy(update={"timing": 65536})}
    return saxpy.model_copy(update={"id": "saxpy_baseline_worker", "naive_source": NAIVE, "params": params})


def test_the_gpu_baseline_is_timed_where_no_candidate_ran(
    evaluator: Evaluator, task: FunctionTask | KernelTask
) -> None:
    attacked = evaluator.evaluate(task, CandidateSource(source=ATTACKER), QUICK)
    assert attacked.passed, attacked.message
    assert attacked.baseline_timing is not None, attacked.seconds
    assert attacked.baseline_timing.median_ms < CLEAN_MS, attacked.baseline_timing
    assert "baseline_timing" in attacked.seconds  # the baseline worker's trials, once for the task
    assert evaluator.device is not None and "sm_" in evaluator.device

    record = evaluator.settings.cache_dir / "baseline-timings"
    (path,) = record.glob(f"*/{baseline_key(task, QUICK)}.json")
    kept = json.loads(path.read_text())
    assert kept["source"] == BASELINE_WORKER and "sm_" in kept["device"]
    assert kept["timing"]["median_ms"] == attacked.baseline_timing.median_ms

    honest = evaluator.evaluate(task, CandidateSource(source=HONEST), QUICK)
    assert honest.passed, honest.message
    assert honest.baseline_timing == attacked.baseline_timing
    assert "baseline_timing" not in honest.seconds
    assert len(evaluator._baseline_runs) == 1
