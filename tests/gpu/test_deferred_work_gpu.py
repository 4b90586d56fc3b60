"""Review 36c's H2 on the GPU function runtime (``GpuFunctionRuntime``: the L2 flush before each timed
call, the device synchronised after it; the CPU tests of the same are in
``tests/integration/executor/test_clock_attack.py``). A function candidate runs in the worker's
process on a GPU too, so it can hook the worker's libc (``clock_gettime``, ``write``) and do a timed
call's work outside the call's announced window: after its end's write, or before its start's write
once the worker has restored its outputs. ``FunctionRuntime.time`` samples each timed call's outputs
inside its window, before the call and after it, so every such candidate is refused; the honest
candidate passes with its output compared sorted too (the samples of that output are only checked
unchanged). Host-built candidates loaded straight into a GPU worker job."""

from __future__ import annotations

import importlib.util
import platform
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.protocol import EvaluationOptions
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, WorkerOutcome
from tests.integration.executor.test_clock_attack import (
    AFTER_THE_END,
    BEFORE_THE_START,
    FIRST_VISITS_LEFT,
    HONEST,
    LIMIT,
    POLY_SORTED_TASK,
    REFUSED,
    deferred,
)
from tests.integration.executor.test_executor_hacks_host import POLY_TASK
from tests.support.hostcode import (
    build_host_candidates,
    run_job_showing_stderr,
    timing_set_job,
    use_worker_process,
    write_task,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidates are x86-64 machine code"),
]

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)


@pytest.fixture(autouse=True, scope="module")
def _in_the_workers_process() -> Iterator[None]:
    """In their workers' process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``), whatever the
    executor's default (this directory runs without tests/conftest.py): what is tested is what a
    candidate that hooks its worker's libc does there."""
    with pytest.MonkeyPatch.context() as patch:
        use_worker_process(patch)
        yield


# No warm-up time (the candidates' calls return at once: a warm-up by time spins to its cap); 25 trials
# so that BEFORE_THE_START's first call on each copy is rarely the one kept whole (what let it pass
# before the samples before the call).
QUICK = EvaluationOptions(
    min_trials=25, max_trials=25, min_timing_ms=5, warmup_ms=0.0, reference_repeats=1, baseline=False
)


def run_on_gpu(
    tmp_path: Path, name: str, source: str, task_json: dict[str, Any]
) -> tuple[WorkerOutcome, str]:
    """``source`` run on the GPU runtime with a call limit (every call announced) on ``task_json``,
    whose reference is the honest poly code."""
    task = write_task(tmp_path, task_json, HONEST)
    product = build_host_candidates(tmp_path, {name: source})[name]
    job = timing_set_job(task, tmp_path / "job", QUICK).model_copy(update={"runtime": "gpu"})
    run = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
    return run_job_showing_stderr(job, run, timeout_s=180)


@pytest.mark.parametrize("task_json", [POLY_TASK, POLY_SORTED_TASK], ids=["elementwise", "sorted"])
def test_the_honest_poly_passes_on_a_gpu(tmp_path: Path, task_json: dict[str, Any]) -> None:
    outcome, stderr = run_on_gpu(tmp_path, "honest", HONEST, task_json)
    assert outcome.passed, f"{outcome.message}\n{stderr}"


@pytest.mark.parametrize("task_json", [POLY_TASK, POLY_SORTED_TASK], ids=["elementwise", "sorted"])
def test_work_left_past_the_end_is_refused_on_a_gpu(tmp_path: Path, task_json: dict[str, Any]) -> None:
    outcome, stderr = run_on_gpu(tmp_path, "after_the_end", AFTER_THE_END, task_json)
    assert not outcome.passed and outcome.error in REFUSED, f"{outcome.message}\n{stderr}"
    assert "changed after its end was announced" in outcome.message, outcome.message


def test_work_done_before_the_start_is_refused_on_a_gpu(tmp_path: Path) -> None:
    outcome, stderr = run_on_gpu(tmp_path, "before_the_start", BEFORE_THE_START, POLY_SORTED_TASK)
    assert not outcome.passed and outcome.error is ErrorKind.WRONG_OUTPUT, f"{outcome.message}\n{stderr}"
    assert "before the call started" in outcome.message, outcome.message


@pytest.mark.parametrize("reads", [2, 3, 4, 6])
def test_work_left_to_a_later_clock_read_is_refused_on_a_gpu(tmp_path: Path, reads: int) -> None:
    outcome, stderr = run_on_gpu(tmp_path, f"deferred{reads}", deferred(reads), POLY_TASK)
    assert not outcome.passed and outcome.error in REFUSED, f"{outcome.message}\n{stderr}"


def test_a_first_visit_left_undone_is_refused_on_a_gpu(tmp_path: Path) -> None:
    outcome, stderr = run_on_gpu(tmp_path, "first_visits_left", FIRST_VISITS_LEFT, POLY_SORTED_TASK)
    assert not outcome.passed and outcome.error in REFUSED, f"{outcome.message}\n{stderr}"
    assert "spot check" in outcome.message, outcome.message
