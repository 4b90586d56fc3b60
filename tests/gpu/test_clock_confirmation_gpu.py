"""The clock check's confirming call on the GPU runtime (executor.clockcheck; the CPU tests of the same:
``tests/integration/executor/test_clock_confirmation.py``): host-built candidates loaded straight into
a GPU worker job (``GpuFunctionRuntime``: the L2 flush before each call, the device synchronised after
it, the confirming buffers page-locked), their first visits held inside their windows by the job's
``first_visit_delay_ms`` (tests only). The honest saxpy passes after its confirming call; review 22c's
changed clock with a memo is refused by its confirming call's window."""

from __future__ import annotations

import importlib.util
import platform
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.protocol import EvaluationOptions
from executor.verdict import ErrorKind
from tests.integration.executor.test_clock_attack import CLOCK_AND_MEMO, HONEST
from tests.integration.executor.test_clock_confirmation import SAXPY, held_up
from tests.integration.executor.test_executor_hacks_host import POLY_TASK
from tests.support.hostcode import (
    build_host_candidates,
    run_job_showing_stderr,
    saxpy_timed_at,
    timing_set_job,
    use_worker_process,
    write_task,
)

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)


@pytest.fixture(autouse=True, scope="module")
def _in_the_workers_process() -> Iterator[None]:
    """In their workers' process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``), whatever the
    executor's default (this directory runs without tests/conftest.py): a runner makes no
    clock-confirming call."""
    with pytest.MonkeyPatch.context() as patch:
        use_worker_process(patch)
        yield


QUICK = EvaluationOptions(
    min_trials=5, max_trials=9, min_timing_ms=5, warmup_ms=0.0, reference_repeats=1, baseline=False
)


def test_an_honest_gpu_function_candidate_held_up_passes_after_confirmation(tmp_path: Path) -> None:
    task = saxpy_timed_at(1 << 18)
    product = build_host_candidates(tmp_path, {"saxpy": SAXPY})["saxpy"]
    job = timing_set_job(task, tmp_path / "job", QUICK).model_copy(update={"runtime": "gpu"})
    run = held_up(product, task)
    outcome, stderr = run_job_showing_stderr(job, run, timeout_s=120)
    assert outcome.passed, f"{outcome.message}\n{stderr}"
    assert outcome.seconds["clock_confirm_calls"] >= 1, outcome.seconds
    assert "clock_confirmed" in outcome.seconds, outcome.seconds


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_a_changed_clock_with_a_memo_is_refused_by_its_confirming_call_on_a_gpu(tmp_path: Path) -> None:
    task = write_task(tmp_path, POLY_TASK, HONEST)
    product = build_host_candidates(tmp_path, {"clock_and_memo": CLOCK_AND_MEMO})["clock_and_memo"]
    job = timing_set_job(task, tmp_path / "job", QUICK).model_copy(update={"runtime": "gpu"})
    run = held_up(product, task)
    outcome, stderr = run_job_showing_stderr(job, run, timeout_s=120)
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, f"{outcome.message}\n{stderr}"
    assert "clock-confirming call(s) on a fresh set" in outcome.message, outcome.message
