"""The runtime jail of candidate workers (executor.sandbox, executor.jail), on the CPU's host runtime.

A function task's candidate runs its host code inside the worker. Here that code tries to read a secret
file placed beside the executor (in the project's checkout, next to the ``executor`` package) and to
write outside its build directory (a directory beside the cache, and the cache's reference libraries).
It computes the right answer only when every one of those attempts fails with ENOENT, EACCES or EROFS,
so the verdict says what the run could reach. These calls are what the static check refuses in plain
source; the jail is for the ones it does not see (a system call through assembly, a name built at run
time).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.evaluate import Evaluator
from executor.jail import protection
from executor.protocol import CandidateSource, EvaluationOptions
from executor.reference import build_reference
from executor.sandbox import (
    JAIL_EXTRA_ENV,
    JAIL_WORKERS_ENV,
    WorkerProcess,
    describe_worker,
    run_job,
    worker_protection,
)
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, WorkerJob
from tests.support.hostcode import FAST, build_host_candidates

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
PROJECT = Path(__file__).resolve().parents[3]
QUICK = EvaluationOptions(min_trials=3, max_trials=10, min_timing_ms=5, reference_repeats=1, baseline=False)

pytestmark = pytest.mark.skipif(protection() != "namespace", reason="no namespaces on this host")


def _nosy(secret: Path, outside: Path, cache_file: Path) -> str:
    """saxpy, right only when the secret cannot be opened and neither file can be written."""
    return f"""
#include <cerrno>
#include <cstdio>
static bool refused(const char* path, const char* mode) {{
    FILE* f = std::fopen(path, mode);
    if (f != nullptr) {{
        if (mode[0] == 'w') std::fputs("written by a candidate", f);
        std::fclose(f);
        return false;
    }}
    return errno == ENOENT || errno == EACCES || errno == EROFS;
}}
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
    bool jailed = refused("{secret}", "r");
    jailed = refused("{outside}", "w") && jailed;
    jailed = refused("{cache_file}", "w") && jailed;
    for (int i = 0; i < n; ++i) y[i] = jailed ? a * x[i] + y[i] : -1.0f;
}}
"""


@pytest.fixture
def secret() -> Iterator[Path]:
    """A secret file beside the executor package (the checkout's root is on the worker's import path)."""
    path = PROJECT / f".jail-secret-{uuid.uuid4().hex[:8]}"
    path.write_text("the executor's secret\n")
    path.chmod(0o644)  # readable by any user: only the jail's view keeps it out
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def task() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


def _job(task: FunctionTask | KernelTask, cache: Path, options: EvaluationOptions = FAST) -> WorkerJob:
    return WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, cache)),
        seeds=[11, 22, 33, 44],
        options=options,
    )


def _setup(
    tmp_path: Path, task: FunctionTask | KernelTask, secret: Path
) -> tuple[WorkerJob, str, Path, Path]:
    cache, outside, products = tmp_path / "cache", tmp_path / "outside", tmp_path / "products"
    for d in (cache, outside, products):
        d.mkdir()
    outside.chmod(0o777)  # writable by the jail's uid too: only the jail's view keeps it out
    job = _job(task, cache)
    marker = outside / "written"
    cache_file = Path(job.reference_library).parent / "written-by-candidate"
    product = build_host_candidates(products, {"nosy": _nosy(secret, marker, cache_file)})["nosy"]
    return job, product, marker, cache_file


def test_a_jailed_candidate_cannot_read_host_files_or_write_outside(
    tmp_path: Path, task: FunctionTask | KernelTask, secret: Path
) -> None:
    job, product, marker, cache_file = _setup(tmp_path, task, secret)
    assert worker_protection("host") == "namespace"
    outcome = run_job(job, CandidateRun(candidate_product=product, candidate_symbol="saxpy"), timeout_s=120)
    assert outcome.passed, outcome.message  # every open failed with ENOENT / EACCES / EROFS
    assert not marker.exists() and not cache_file.exists()


def test_without_the_jail_the_same_candidate_reads_and_writes(
    tmp_path: Path, task: FunctionTask | KernelTask, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The setting that turns the jail off (for debugging) shows what the jail stops."""
    monkeypatch.setenv(JAIL_WORKERS_ENV, "false")
    job, product, marker, cache_file = _setup(tmp_path, task, secret)
    assert worker_protection("host") == "none"
    outcome = run_job(job, CandidateRun(candidate_product=product, candidate_symbol="saxpy"), timeout_s=120)
    assert outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
    assert marker.read_text() == "written by a candidate"
    assert cache_file.exists()


def test_a_jail_that_cannot_be_built_falls_back_and_says_so(
    tmp_path: Path, task: FunctionTask | KernelTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bind that cannot be made (a required path that is missing, as a wrong bind list on a GPU host
    would be) fails the jail's start-up probe: workers start under the next weaker protection instead
    of every candidate failing, and the worker's log names it."""
    monkeypatch.setenv(JAIL_EXTRA_ENV, str(tmp_path / "no-such-library-dir"))
    kind = worker_protection("host")
    assert kind in ("uid", "none")
    worker = WorkerProcess("candidate", "host")
    try:
        assert worker.protection == kind
        assert worker.stderr_path.read_text().splitlines()[0] == f"[{describe_worker(kind)}]"
    finally:
        worker.close()
    (tmp_path / "cache").mkdir()
    products = build_host_candidates(
        tmp_path,
        {
            "ok": 'extern "C" void saxpy(int n, float a, const float* x, float* y) '
            "{ for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }"
        },
    )
    outcome = run_job(
        _job(task, tmp_path / "cache"),
        CandidateRun(candidate_product=products["ok"], candidate_symbol="saxpy"),
        timeout_s=120,
    )
    assert outcome.passed, outcome.message


def test_a_crashing_jailed_candidate_reports_its_signal_and_protection(
    tmp_path: Path, task: FunctionTask | KernelTask
) -> None:
    """The candidate is not PID 1 of its namespace (the jail's init is), so abort() kills it with
    SIGABRT as outside; the worker's log, shown with the crash, names the jail."""
    (tmp_path / "cache").mkdir()
    products = build_host_candidates(
        tmp_path,
        {
            "abort": '#include <cstdlib>\nextern "C" void saxpy(int n, float a, const float* x, float* y) '
            "{ std::abort(); }"
        },
    )
    outcome = run_job(
        _job(task, tmp_path / "cache"),
        CandidateRun(candidate_product=products["abort"], candidate_symbol="saxpy"),
        timeout_s=120,
    )
    assert outcome.error is ErrorKind.CRASH
    assert "SIGABRT" in outcome.message
    assert "mount/PID-namespace jail" in outcome.message


def test_candidates_pass_through_the_evaluator_in_the_jail(tmp_path: Path) -> None:
    """Through the evaluator, the jailed candidate worker reads what other workers wrote as the
    executor's user: the reference worker's expected outputs and the task's stored timing set (the
    second candidate is timed on it). On the H200 (session 17, call 3) this failed before the reference
    worker's directory and the timing sets were opened to the jail's uid."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    settings = ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", run_timeout_s=60)
    evaluator = Evaluator(settings)
    try:
        saxpy = load_task(TASKS_DIR / "saxpy")
        for k in range(2):
            source = (
                'extern "C" void saxpy(int n, float a, const float* x, float* y) '
                "{ for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
                "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
                f"// variant {k}\n"
            )
            verdict = evaluator.evaluate(saxpy, CandidateSource(source=source), QUICK)
            assert verdict.passed, verdict.message
            assert verdict.seconds.get("expected_load", 0) > 0 or k == 0, verdict.seconds
    finally:
        evaluator.close()
    assert worker_protection("host") == "namespace"
