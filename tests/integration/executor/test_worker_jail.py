"""The runtime jail of the workers (executor.sandbox, executor.jail), on the CPU's host runtime.

A function task's candidate runs its host code inside the worker. Here that code tries to read a secret
file placed beside the executor (in the project's checkout, next to the ``executor`` package) and to
write outside its build directory (a directory beside the cache, and the cache's reference libraries).
It computes the right answer only when every one of those attempts fails with ENOENT, EACCES or EROFS,
so the verdict says what the run could reach. These calls are what the static check refuses in plain
source; the jail is for the ones it does not see (a system call through assembly, a name built at run
time).

A task's reference runs in a worker too, and a caller may send the task inline (its reference is then
the caller's code): the same jail holds it, with the store of timing sets read-only (the executor
adopts the sets it makes: tests/integration/executor/test_timingset_store_attack.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from executor.compile import find_toolchain
from executor.errors import ToolchainError, WorkerError
from executor.evaluate import Evaluator
from executor.jail import is_root, protection
from executor.protocol import CandidateSource, EvaluationOptions
from executor.reference import build_reference
from executor.sandbox import (
    JAIL_EXTRA_ENV,
    JAIL_WORKERS_ENV,
    WorkerProcess,
    describe_worker,
    finish_reference,
    run_job,
    start_reference,
    worker_protection,
)
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task, parse_task
from executor.timingset import load_expected, timing_set_spec
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, ReferenceJob, WorkerJob, expected_path
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


def _nosy_reference(secret: Path, outside: Path) -> str:
    """saxpy's reference that writes outside its directory and leaks the secret's first byte (as y[0])
    wherever it can open them."""
    return f"""
#include <cstdio>
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
    int leaked = -1;
    if (std::FILE* f = std::fopen("{secret}", "r")) {{ leaked = std::fgetc(f); std::fclose(f); }}
    if (std::FILE* f = std::fopen("{outside}", "w")) {{ std::fputs("written by a reference", f); std::fclose(f); }}
    for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
    if (leaked >= 0 && n > 0) y[0] = static_cast<float>(leaked);
}}
"""


def _run_inline_reference(
    tmp_path: Path, task: FunctionTask | KernelTask, secret: Path
) -> tuple[WorkerProcess, bool, float, float, Path]:
    """An inline task (as MCP ``evaluate_candidate`` or ``POST /v1/optimize`` take it) whose reference is
    nosy, run by a reference worker that also stores the task's timing set and times the reference:
    ``(worker, ok, y[0] of the expected outputs, y[0] of the stored timing set, outside marker)``."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    for d in (cache, outside):
        d.mkdir()
    outside.chmod(0o777)  # writable by the jail's uid too: only the jail's view keeps it out
    marker = outside / "written"
    inline = parse_task(
        {
            **task.model_dump(mode="json"),
            "id": f"inline_{uuid.uuid4().hex[:6]}",
            "reference_source": _nosy_reference(secret, marker),
        }
    )
    library = build_reference(inline, cache)
    spec = timing_set_spec(inline, library, cache / "timing-sets")
    worker = WorkerProcess("reference", "none")
    try:
        job = ReferenceJob(
            task=inline,
            reference_library=str(library),
            seeds=[11, 22, 33, 44],
            options=QUICK,
            sets=1,
            out_dir="",
            time_reference=True,
            timing_set=spec,
        )
        start_reference(worker, job, None)
        outcome = finish_reference(worker, timeout_s=120)
        assert outcome.ok, outcome.message
        expected = float(np.load(expected_path(worker.dir / "expected", 0, "y"))[0])
        stored = load_expected(spec, inline)
        assert stored is not None, "the timing set was not stored"
        return worker, outcome.ok, expected, float(stored["y"][0]), marker
    finally:
        worker.close()


def test_an_inline_tasks_reference_is_jailed(
    tmp_path: Path, task: FunctionTask | KernelTask, secret: Path
) -> None:
    """The reference worker runs in the candidate's jail: the secret beside the executor does not reach
    its outputs (the expected values a mismatch message would show), its write outside fails, and it
    still makes the task's timing set, which the executor stores."""
    assert worker_protection("none", "reference") == "namespace"
    worker, _, expected, stored, marker = _run_inline_reference(tmp_path, task, secret)
    assert worker.protection == "namespace"
    assert abs(expected) <= 3.5 and abs(stored) <= 3.5  # a*x+y of uniform(-1, 1) values, not the secret
    assert not marker.exists()


def test_without_the_jail_the_same_reference_leaks_and_writes(
    tmp_path: Path, task: FunctionTask | KernelTask, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JAIL_WORKERS_ENV, "0")
    assert worker_protection("none", "reference") == "none"
    worker, _, expected, stored, marker = _run_inline_reference(tmp_path, task, secret)
    assert worker.protection == "none"
    assert expected == stored == ord("t")  # the secret's first byte
    assert marker.read_text() == "written by a reference"


def test_a_jail_that_cannot_be_built_falls_back_and_says_so(
    tmp_path: Path, task: FunctionTask | KernelTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bind that cannot be made (a required path that is missing, as a wrong bind list on a GPU host
    would be) fails the jail's start-up probe: workers start under the next weaker protection instead
    of every candidate failing, and the worker's log names it."""
    monkeypatch.setenv(JAIL_EXTRA_ENV, str(tmp_path / "no-such-library-dir"))
    try:
        kind = worker_protection("host")
    except WorkerError as e:
        # As root the next weaker is ``uid``, and none after it: where its workers cannot reach the
        # interpreter (a 0700 home), refused with both reasons rather than run as root (test_uid_reach.py).
        assert is_root() and "namespace: " in str(e) and "uid: " in str(e) and "cannot reach" in str(e), str(
            e
        )
        return
    assert kind == ("uid" if is_root() else "none")
    worker = WorkerProcess("candidate", "host")
    try:
        assert worker.protection == kind
        assert worker.stderr_path.read_text().splitlines()[0] == f"[{describe_worker(kind)}]"
    finally:
        worker.close()
    reference = WorkerProcess("reference", "none")  # probed on its own, with the same fallback
    try:
        assert reference.protection == worker_protection("none", "reference") in ("uid", "none")
        line = f"[{describe_worker(reference.protection, 'reference')}]"
        assert reference.stderr_path.read_text().splitlines()[0] == line
    finally:
        reference.close()
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


def _saxpy(tag: str) -> str:
    """An honest saxpy in a .cu with a kernel of its own (built by nvcc), distinct per ``tag``."""
    return (
        'extern "C" void saxpy(int n, float a, const float* x, float* y) '
        "{ for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
        "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
        f"// {tag}\n"
    )


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
            verdict = evaluator.evaluate(saxpy, CandidateSource(source=_saxpy(f"variant {k}")), QUICK)
            assert verdict.passed, verdict.message
            assert verdict.seconds.get("expected_load", 0) > 0 or k == 0, verdict.seconds
    finally:
        evaluator.close()
    assert worker_protection("host") == "namespace"


def test_builds_reached_through_a_link_serve_jailed_candidates(tmp_path: Path) -> None:
    """The cache's builds (``<cache_dir>/candidates``) reached through a symbolic link (a test run's
    shared builds, an operator's builds on another disk): once the builds' real directory is bound
    into the jails, the worker is handed the product's real path, not the linked one that its jail
    does not show (seen failing: the second candidate's worker "exited with status 1 during
    correctness without a result")."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    (tmp_path / "builds").mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "candidates").symlink_to(tmp_path / "builds", target_is_directory=True)
    settings = ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", run_timeout_s=60)
    evaluator = Evaluator(settings)
    try:
        saxpy = load_task(TASKS_DIR / "saxpy")
        for k in range(3):
            verdict = evaluator.evaluate(saxpy, CandidateSource(source=_saxpy(f"linked {k % 2}")), QUICK)
            assert verdict.passed, f"candidate {k}: {verdict.message}"
    finally:
        evaluator.close()
    assert worker_protection("host") == "namespace"


def test_a_cache_reached_through_a_link_serves_jailed_workers(tmp_path: Path) -> None:
    """``cache_dir`` itself reached through a symbolic link (an operator's cache on another disk): the
    reference library, the timing sets and the builds are handed to the workers under the link's
    paths, and every directory their jails bind is the real one, so each job's paths must be the real
    ones too, not only the builds' (seen failing: the reference's worker could not open its library,
    a ``reference_error``)."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    (tmp_path / "real-cache").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "real-cache", target_is_directory=True)
    settings = ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", run_timeout_s=60)
    evaluator = Evaluator(settings)
    try:
        saxpy = load_task(TASKS_DIR / "saxpy")
        for k in range(3):
            verdict = evaluator.evaluate(
                saxpy, CandidateSource(source=_saxpy(f"cache linked {k % 2}")), QUICK
            )
            assert verdict.passed, f"candidate {k}: {verdict.error} {verdict.message}"
    finally:
        evaluator.close()
    assert worker_protection("host") == "namespace"
