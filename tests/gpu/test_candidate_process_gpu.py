"""A GPU function candidate runs in a process of its own (:mod:`executor.worker.runner`), with its own
CUDA context: the naive saxpy passes and reports the runner's round trip; a candidate that crashes on
the host side after its first CUDA call is a ``crash`` (the runner's death is the candidate's, never the
checker's); one that rewrites its process's clock is timed on the worker's clock like the honest code.

The CPU tests of the same: ``tests/integration/executor/test_candidate_process.py`` and
``test_clock_attack.py``.
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.runlimit import CallLimit
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from tests.integration.executor.test_clock_attack import CLOCK
from tests.support.hostcode import CUDA_HOST_FAULT, use_candidate_process

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

TASKS = Path(__file__).parents[1] / "unit" / "executor" / "fixtures" / "tasks"
QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1, baseline=False)
# Dereferences a null pointer on the host after its first CUDA call (a fault in the runner).
CRASH = CUDA_HOST_FAULT


@pytest.fixture(scope="module", autouse=True)
def _candidate_process() -> Iterator[None]:
    """The runner is the operator's choice (off by default): on for this module's workers."""
    with pytest.MonkeyPatch.context() as patch:
        use_candidate_process(patch)
        yield


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("runner-gpu"), runtime="gpu", run_timeout_s=120
    )
    built = Evaluator(settings)
    yield built
    built.close()


def test_the_naive_function_candidate_passes_in_its_own_process(evaluator: Evaluator) -> None:
    task = load_task(TASKS / "saxpy")
    assert task.naive_source is not None
    verdict = evaluator.evaluate(task, CandidateSource(source=task.naive_source), QUICK)
    assert verdict.passed, verdict.message
    assert 0 < verdict.seconds["runner_roundtrip"] < 0.01, verdict.seconds


def test_a_host_fault_in_the_candidates_process_is_its_crash(evaluator: Evaluator) -> None:
    verdict = evaluator.evaluate(load_task(TASKS / "saxpy"), CandidateSource(source=CRASH), QUICK)
    assert not verdict.passed and verdict.error is ErrorKind.CRASH, verdict.message
    assert "SIGSEGV" in verdict.message, verdict.message


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_a_candidate_that_slows_its_clock_is_timed_on_the_workers(tmp_path: Path) -> None:
    """The host runtime's clock attack (tests/integration/executor/test_clock_attack.py) on a GPU
    function task, loaded straight into a worker job (the static rules would refuse its assembly)."""
    from executor.worker.messages import CandidateRun
    from tests.integration.executor.test_clock_attack import HONEST
    from tests.integration.executor.test_executor_hacks_host import POLY_TASK
    from tests.support.hostcode import (
        build_host_candidates,
        run_job_showing_stderr,
        timing_set_job,
        write_task,
    )

    task = write_task(tmp_path, POLY_TASK, HONEST)
    built = build_host_candidates(tmp_path, {"clock": CLOCK})
    limit = CallLimit(seconds=30.0, floor_s=20.0, factor=10.0, basis="reference", basis_ms=1000.0)
    job = timing_set_job(task, tmp_path / "job", QUICK).model_copy(update={"runtime": "gpu"})
    run = CandidateRun(candidate_product=built["clock"], candidate_symbol=task.entry, call_limit=limit)
    clock, stderr = run_job_showing_stderr(job, run, timeout_s=120)
    assert clock.passed and clock.candidate_timing is not None, f"{clock.message}\n{stderr}"
    # Its calls take ~58 ms of poly_iter each on the CPU; its own clock reads 0.02 ms.
    assert clock.candidate_timing.median_ms > 10, clock.candidate_timing


# A saxpy that spins 150 ms on the trials' first visits only, told by its input's values (the first 8
# floats: a runner maps each set where its mmap chooses) in a process that made the correctness calls
# (at the test size, below 100,000): there the correctness call's timing-size set is the first new
# values (the warm-up runs on them again), the two timing sets the second and third. The confirming call
# is made in a fresh runner, which makes no correctness call (review 38's M1, mended after review 39;
# tests/unit/executor/test_repeat_confirmation.py's BURST_BY_VALUES).
BURST_BY_VALUES_SAXPY = (
    "#include <chrono>\n#include <cstring>\n"
    "static float seen_values[64][8]; static int nvalues = 0; static int small_calls = 0;\n"
    "static void burst(int n, const float* x) {\n"
    "    if (n < 100000) { ++small_calls; return; }\n"
    "    for (int k = 0; k < nvalues; ++k) if (std::memcmp(seen_values[k], x, sizeof seen_values[k]) == 0) return;\n"
    "    if (nvalues < 64) std::memcpy(seen_values[nvalues], x, sizeof seen_values[nvalues]);\n"
    "    ++nvalues;\n"
    "    if (small_calls > 0 && (nvalues == 2 || nvalues == 3)) {\n"
    "        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);\n"
    "        while (std::chrono::steady_clock::now() < until) {}\n"
    "    }\n}\n"
)


def test_a_burst_on_both_first_visits_is_confirmed_in_a_fresh_candidate_process(evaluator: Evaluator) -> None:
    """Review 38's M1 on a GPU: the trials' runner is killed after the trials, and the repeat-visit
    rule's confirming call is made in a fresh runner (its own CUDA context, warmed up on a set of its
    own, killed at the call's acknowledgement); the candidate above passes, and without the call
    (``repeat_confirm`` off) the rule refuses it, as it refused every such candidate in a runner before."""
    task = load_task(TASKS / "saxpy")
    naive = task.naive_source
    head = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    assert naive is not None and head in naive
    source = BURST_BY_VALUES_SAXPY + naive.replace(head, head + "    burst(n, x);\n")
    verdict = evaluator.evaluate(task, CandidateSource(source=source), QUICK)
    assert verdict.passed, verdict.message
    assert "runner_roundtrip" in verdict.seconds and "repeat_confirm_call" in verdict.seconds, verdict.seconds
    # the fresh runner's start, load and warm-up
    assert "repeat_confirm_process" in verdict.seconds, verdict.seconds
    off = evaluator.evaluate(
        task,
        CandidateSource(source=source + "\n// off\n"),
        QUICK.model_copy(update={"repeat_confirm": False}),
    )
    assert not off.passed and off.error is ErrorKind.IMPLAUSIBLE, off.message
