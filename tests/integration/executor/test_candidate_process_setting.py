"""Where a function candidate runs: ``REGRAPH_EXECUTOR_CANDIDATE_PROCESS`` (:mod:`executor.worker.runner`).

Its default, ``auto``, runs a function candidate in a process of its own (the runner) wherever a runner
can confine itself (Landlock and its seccomp filter, found by a probe once per executor process), and in
its worker's process elsewhere: never refused because of the host. Where it runs, and why, is the second
line of each candidate worker's log (shown with a crash) and the executor's device description
(``GET /v1/device``). ``1`` always runs it in a runner (which refuses it where it cannot confine itself),
``0`` always in its worker; anything else stops the executor's start. Only the probe's own answer
(``not confined: WHY``) runs candidates in their workers: a probe that gives none chooses the runner
(review 38, M2).

A host without Landlock is made here as the kernel makes it: a process (and everything it starts) under
a seccomp filter that answers Landlock's system calls with ENOSYS, as a kernel built without it does.
Host runtime, built with the host compiler.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from executor.app import create_app
from executor.evaluate import Evaluator
from executor.settings import ExecutorSettings
from executor.verdict import ErrorKind
from executor.worker import runner
from executor.worker.messages import CandidateRun, WorkerJob, WorkerOutcome
from executor.worker.runner import (
    CANDIDATE_PROCESS_ENV,
    LANDLOCK_ENV,
    candidate_process,
    const_inputs_said,
    landlock_version,
)
from tests.support.hostcode import (
    FAST,
    SAXPY_HEAD,
    build_host_candidates,
    run_job_showing_stderr,
    saxpy_timed_at,
    use_default_candidate_process,
)
from tests.support.scripts import script_answer

CANDIDATES = {
    "correct": SAXPY_HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }",
    "segfault": SAXPY_HEAD + "volatile int* p = nullptr; *p = 1; }",
}
OWN = "a function candidate runs in a process of its own, confined by Landlock and a seccomp filter"
WORKERS = "a function candidate runs in its worker's process"


@pytest.fixture(autouse=True)
def _default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's default, which tests/conftest.py sets aside for the suite."""
    use_default_candidate_process(monkeypatch)


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(tmp_path_factory.mktemp("candidates"), CANDIDATES)


def _job(cache: Path) -> WorkerJob:
    from executor.reference import build_reference

    task = saxpy_timed_at()
    return WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, cache)),
        seeds=[101, 202, 303, 404],
        options=FAST.model_copy(update={"run_timing": True}),
    )


def _run(product: str) -> CandidateRun:
    return CandidateRun(candidate_product=product, candidate_symbol="saxpy")


def _in_a_runner(outcome: WorkerOutcome) -> bool:
    """Whether the candidate ran in a runner: a worker that started one measured its round trip."""
    return "runner_roundtrip" in outcome.seconds


def test_by_default_a_function_candidate_runs_in_a_confined_process_of_its_own(
    tmp_path: Path, products: dict[str, str]
) -> None:
    if landlock_version() == 0:
        pytest.skip("no Landlock on this kernel: the default runs a function candidate in its worker")
    outcome, stderr = run_job_showing_stderr(_job(tmp_path), _run(products["correct"]), 120)
    assert outcome.passed and _in_a_runner(outcome), (outcome.message, stderr)
    # ... and whether its const inputs are read-only there (session 39: a sealed memfd).
    assert f"[{OWN} ({CANDIDATE_PROCESS_ENV}=auto); {const_inputs_said()}]" in stderr.splitlines()
    # The executor's device description says the same.
    settings = ExecutorSettings(cache_dir=tmp_path / "cache", runtime="host", prewarm_workers=False)
    with TestClient(create_app(settings)) as client:
        device = client.get("/v1/device").json()
    assert device["candidate_process"].startswith(OWN), device
    assert device["candidate_process"].endswith(f"; {const_inputs_said()}"), device


def test_where_a_runner_is_not_to_be_confined_the_default_runs_it_in_its_worker_and_says_so(
    tmp_path: Path, products: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the runner's confinement turned off by the operator (``REGRAPH_EXECUTOR_RUNNER_LANDLOCK=0``),
    ``auto`` runs no unconfined runner: the candidate runs in its worker, and its crash says so."""
    monkeypatch.setenv(LANDLOCK_ENV, "0")
    outcome, stderr = run_job_showing_stderr(_job(tmp_path / "correct"), _run(products["correct"]), 120)
    assert outcome.passed and not _in_a_runner(outcome), (outcome.message, stderr)
    crash, _ = run_job_showing_stderr(_job(tmp_path / "segfault"), _run(products["segfault"]), 120)
    assert crash.error is not None and crash.error.value == "crash", crash.message
    assert f"[{WORKERS}" in crash.message and f"({LANDLOCK_ENV} is off;" in crash.message, crash.message


# A process under a seccomp filter that answers Landlock's three system calls with ENOSYS (a kernel
# without Landlock), inherited by everything it starts (the probe, the workers, their runners); it runs
# one candidate job under the default, as the test process passes it (a worker job, the library).
_NO_LANDLOCK_FILTER = """
import ctypes, errno, json, platform, struct, sys
from executor.worker import runner
seccomp, arch, *_ = runner._SECCOMP_ABI[platform.machine()]
bpf = runner._bpf
allow, enosys = 0x7FFF0000, 0x00050000 | errno.ENOSYS
prog = [bpf(0x20, 4), bpf(0x15, arch, 1, 0), bpf(0x06, allow), bpf(0x20, 0)]
for number in (444, 445, 446):  # landlock_create_ruleset, landlock_add_rule, landlock_restrict_self
    prog += [bpf(0x15, number, 0, 1), bpf(0x06, enosys)]
prog.append(bpf(0x06, allow))
code = ctypes.create_string_buffer(b"".join(prog))
fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(code))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.syscall(ctypes.c_long(seccomp), ctypes.c_long(1), ctypes.c_long(0), ctypes.c_char_p(fprog)) == 0
"""
_NO_LANDLOCK = (
    _NO_LANDLOCK_FILTER
    + """
from executor.worker.messages import CandidateRun, WorkerJob
from tests.support.hostcode import run_job_showing_stderr
job = WorkerJob.model_validate_json(open(sys.argv[1]).read())
outcome, stderr = run_job_showing_stderr(job, CandidateRun(candidate_product=sys.argv[2], candidate_symbol="saxpy"), 120)
print(json.dumps({"landlock": runner.landlock_version(), "outcome": outcome.model_dump(mode="json"), "stderr": stderr}))
"""
)


def _without_landlock(cwd: Path, script: str, *args: str) -> dict[str, Any]:
    """``script`` run with ``args`` under the default in a process of a host without Landlock; what it
    printed last, as JSON."""
    return script_answer(script, *args, cwd=cwd, timeout_s=300, unset=(CANDIDATE_PROCESS_ENV,))


def test_on_a_host_without_landlock_the_default_runs_the_candidate_in_its_worker_and_says_so(
    tmp_path: Path, products: dict[str, str]
) -> None:
    """Not refused because of the host (``1`` refuses it there: ``runtime_not_available``)."""
    job = tmp_path / "job.json"
    job.write_text(_job(tmp_path).model_dump_json())
    answer = _without_landlock(tmp_path, _NO_LANDLOCK, str(job), products["correct"])
    outcome = WorkerOutcome.model_validate(answer["outcome"])
    assert answer["landlock"] == 0
    assert outcome.passed and not _in_a_runner(outcome), (outcome.message, answer["stderr"])
    said = [line for line in answer["stderr"].splitlines() if line.startswith(f"[{WORKERS}")]
    assert said and "Landlock is not available here" in said[0], answer["stderr"]


# The clock attack of test_clock_attack (a candidate that rewrites its process's clock_gettime) run
# from the worker down, on the same host, with the fewest trials the check reads.
_NO_LANDLOCK_CLOCK = (
    _NO_LANDLOCK_FILTER
    + """
from pathlib import Path
from tests.integration.executor import test_clock_attack as attack
options = attack.OPTIONS.model_copy(update={"min_trials": 3, "max_trials": 3})
outcome = attack.run_poly_attack(Path.cwd(), "clock", attack.CLOCK, options)
print(json.dumps({"landlock": runner.landlock_version(), "outcome": outcome.model_dump(mode="json")}))
"""
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_on_a_host_without_landlock_the_executor_knows_the_candidate_ran_in_its_worker(
    tmp_path: Path,
) -> None:
    """Review 38, D1: there, under the default, the clock attack runs in its worker, and the executor's
    clock check knows it (``own_process`` False: each timed call's window is compared with what the
    worker's clock read), so the attack is refused. An executor that took it for a runner's skipped
    that comparison and passed it (~0.1 ms a call against ~85 ms honest, review 38)."""
    answer = _without_landlock(tmp_path, _NO_LANDLOCK_CLOCK)
    outcome = WorkerOutcome.model_validate(answer["outcome"])
    assert answer["landlock"] == 0
    assert not _in_a_runner(outcome), outcome.message
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, outcome.message
    assert "executor's clock" in (outcome.message or ""), outcome.message


@pytest.mark.parametrize("fails", ["timeout", "status", "output"])
def test_a_probe_that_gives_no_answer_runs_the_candidate_in_a_process_of_its_own(
    tmp_path: Path, products: dict[str, str], monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """Review 38, M2: under ``auto`` only the probe's own answer (``not confined: WHY``) runs candidates
    in their workers. A probe that runs past its limit, exits non-zero or writes anything else chooses
    the runner (fail closed: a runner that then cannot confine itself refuses the candidate, as ``1``
    does), and the line says so. The real timeout runs an honest candidate (a runner confines itself
    here); the other two are the probe's answer made up."""
    if fails == "timeout" and landlock_version() == 0:
        pytest.skip("no Landlock on this kernel: a runner cannot confine itself here")
    monkeypatch.setattr(runner, "_confinement", [])  # not probed yet in this process
    if fails == "timeout":
        monkeypatch.setattr(runner, "PROBE_S", 0.001)
    else:
        made_up = {"status": (1, ""), "output": (0, "confined, or not")}[fails]

        def probed(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(argv, made_up[0], made_up[1], "")

        monkeypatch.setattr(subprocess, "run", probed)  # the probe's, in runner
    inside, line = candidate_process()
    assert inside and "the probe of its confinement gave no answer" in line, line
    monkeypatch.setattr(runner, "PROBE_S", 60.0)
    again = candidate_process()  # kept, not probed again
    assert again == (inside, line)
    if fails != "timeout":
        return
    assert "timed out" in line, line
    outcome, stderr = run_job_showing_stderr(_job(tmp_path), _run(products["correct"]), 120)
    assert outcome.passed and _in_a_runner(outcome), (outcome.message, stderr)
    assert f"[{line}]" in stderr.splitlines(), stderr


@pytest.mark.parametrize("value", ["yes please", "2", "runner"])
def test_an_unknown_value_stops_the_executors_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(CANDIDATE_PROCESS_ENV, value)
    # No runtime that runs candidates: the value is read at the start all the same.
    with pytest.raises(ValueError, match=CANDIDATE_PROCESS_ENV) as raised:
        Evaluator(ExecutorSettings(cache_dir=tmp_path, runtime="none", prewarm_workers=False))
    for allowed in ("auto", "1", "0", repr(value)):
        assert allowed in str(raised.value)
