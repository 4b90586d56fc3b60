"""Crash / timeout / memory isolation of the worker, exercised on the CPU with host-code candidates.

The candidates here are plain C++ compiled into shared libraries: the worker path that loads a .so
and calls its entry through ctypes is the same with or without a GPU. They run where the executor's
default puts them (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=auto``: in a process of their own, the runner,
wherever it can be confined, as on this host; tests/conftest.py sets the suite's aside).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from executor.gpulock import LOCK_ENV, RESOURCES, lock_files, lock_path
from executor.protocol import EvaluationOptions
from executor.reference import build_reference
from executor.sandbox import (
    WorkerPool,
    WorkerProcess,
    finish_candidate,
    run_job,
    start_candidate,
)
from executor.taskformat import FunctionTask, KernelTask
from executor.timingset import TimingSetSpec
from executor.verdict import ErrorKind
from executor.worker.candidate import RunLocks, Worker
from executor.worker.messages import DONE_FD_ENV, CandidateRun, WorkerJob, WorkerOutcome, write_result
from tests.support.hostcode import (
    FAST,
    build_host_candidates,
    saxpy_timed_at,
    use_default_candidate_process,
    use_worker_process,
)

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"

HEAD = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
CANDIDATES = {
    "correct": HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }",
    "segfault": HEAD + "volatile int* p = nullptr; *p = 1; }",
    "abort": "#include <cstdlib>\n" + HEAD + "std::abort(); }",
    "hang": HEAD + "volatile int k = 0; while (true) { k = k + 1; } }",
    "wrong": HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] - y[i]; }",
    "partial": HEAD + "for (int i = 0; i < n / 2; ++i) y[i] = a * x[i] + y[i]; }",
    "imprecise": HEAD + "for (int i = 0; i < n; ++i) y[i] = (float)(int)(a * x[i] + y[i]); }",
    "hog": "#include <cstring>\n#include <new>\n"
    + HEAD
    + "for (int k = 0; k < 1000; ++k) { char* p = new char[1 << 28]; std::memset(p, 1, 1 << 28); } }",
    # Right on the first four calls (the correctness calls of FAST), wrong from then on.
    "late_wrong": HEAD
    + "static int calls = 0; if (++calls <= 4) { for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }"
    " else { for (int i = 0; i < n; ++i) y[i] = a * x[i] - y[i]; } }",
    # Right on the correctness calls of FAST, then hangs in its first timed (warm-up) call.
    "late_hang": HEAD
    + "static int calls = 0; if (++calls <= 4) { for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }"
    " else { volatile int k = 0; while (true) { k = k + 1; } } }",
    # Remembers the first answer and replays it: right once, wrong on the next input set.
    "cached": "#include <vector>\nstatic std::vector<float> memo;\n"
    + HEAD
    + "if (memo.empty()) { for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; memo.assign(y, y + n); }"
    " else { for (int i = 0; i < n && i < (int)memo.size(); ++i) y[i] = memo[i]; } }",
}


@pytest.fixture(autouse=True)
def _default(monkeypatch: pytest.MonkeyPatch) -> None:
    use_default_candidate_process(monkeypatch)


@pytest.fixture(scope="module")
def task() -> FunctionTask | KernelTask:
    """saxpy timed at 256 Ki floats: what these tests check (outcomes, limits, locks and their order,
    the checks behind the trials) does not depend on the timing size."""
    return saxpy_timed_at()


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(tmp_path_factory.mktemp("host-candidates"), CANDIDATES)


def _job(task: FunctionTask | KernelTask, cache: Path, run_timing: bool = False) -> WorkerJob:
    return WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, cache)),
        seeds=[101, 202, 303, 404],
        options=FAST.model_copy(update={"run_timing": run_timing}),
    )


def _run(product: str) -> CandidateRun:
    return CandidateRun(candidate_product=product, candidate_symbol="saxpy")


def test_correct_host_candidate_passes_and_is_timed(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = run_job(_job(task, tmp_path, run_timing=True), _run(products["correct"]), timeout_s=120)
    assert outcome.passed, outcome.message
    assert outcome.error is None and outcome.stage == "timing"
    assert outcome.input_sets_checked == 4
    assert outcome.candidate_timing is not None and outcome.candidate_timing.trials >= 3
    # The reference is never timed in the process that ran the candidate (the evaluator times it in a
    # reference worker and keeps its own copy).
    assert outcome.reference_timing is None


@pytest.mark.parametrize(
    ("name", "kind", "words"),
    [
        ("segfault", ErrorKind.CRASH, "SIGSEGV"),
        ("abort", ErrorKind.CRASH, "SIGABRT"),
        ("wrong", ErrorKind.WRONG_OUTPUT, "differ from the reference"),
        ("partial", ErrorKind.WRONG_OUTPUT, "differ"),
        ("imprecise", ErrorKind.WRONG_OUTPUT, "differ"),
        ("cached", ErrorKind.WRONG_OUTPUT, "differ"),
    ],
)
def test_failures_become_outcomes(
    task: FunctionTask | KernelTask,
    products: dict[str, str],
    tmp_path: Path,
    name: str,
    kind: ErrorKind,
    words: str,
) -> None:
    outcome = run_job(_job(task, tmp_path), _run(products[name]), timeout_s=60)
    assert not outcome.passed
    assert outcome.error is kind, outcome.message
    assert words in outcome.message


def test_trials_run_on_the_timing_set_even_before_it_is_stored(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """A timing set that no reference worker has stored yet (or that was pruned) is drawn from its seed
    by the candidate's worker, and the last trial is checked against the reference run after it."""
    spec = TimingSetSpec(dir=str(tmp_path / "not-stored"), seed=777)
    job = _job(task, tmp_path, run_timing=True).model_copy(update={"timing_set": spec})
    good = run_job(job, _run(products["correct"]), timeout_s=120)
    assert good.passed, good.message
    assert good.input_sets_checked == 4 and "timing_inputs" in good.seconds
    late = run_job(job, _run(products["late_wrong"]), timeout_s=120)
    assert late.error is ErrorKind.WRONG_OUTPUT and late.stage == "timing"
    # the set's seed is withheld from the verdict (executor.worker.candidate.withheld)
    assert late.mismatch is not None and (late.mismatch.seed, late.mismatch.size) == (None, "timing")
    assert not Path(spec.dir).exists()  # only a reference worker stores it


def test_hang_is_killed_at_the_deadline(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    start = time.monotonic()
    outcome = run_job(_job(task, tmp_path), _run(products["hang"]), timeout_s=3)
    assert outcome.error is ErrorKind.TIMEOUT and not outcome.passed
    assert "correctness" in outcome.message
    assert time.monotonic() - start < 15


def test_a_run_limit_counts_from_the_candidates_first_run(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """The derived run limit (executor.runlimit) kills a hang seconds after it starts running, long
    before the worker's overall limit; the inputs prepared before it do not count."""
    start = time.monotonic()
    outcome = run_job(_job(task, tmp_path), _run(products["hang"]), timeout_s=120, run_limit_s=2.0)
    assert outcome.error is ErrorKind.TIMEOUT and not outcome.passed
    assert "during correctness" in outcome.message and "run limit 2.0s" in outcome.message
    assert time.monotonic() - start < 60


def test_memory_hog_is_stopped_by_the_limit(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = run_job(_job(task, tmp_path), _run(products["hog"]), timeout_s=60, memory_limit_bytes=2 << 30)
    assert not outcome.passed
    assert outcome.error in (ErrorKind.OUT_OF_MEMORY, ErrorKind.CRASH), outcome.message
    # after all of that, a good candidate still runs: nothing in the parent was harmed
    assert run_job(_job(task, tmp_path), _run(products["correct"]), timeout_s=60).passed


def test_a_pool_worker_holds_the_gpu_lock_while_it_runs_and_a_kill_releases_it(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """The pool names its lock file to its candidate workers; a function task's worker holds the GPU's,
    the uploads' and the host memory's locks alone through its trials (here a candidate that hangs in its first
    timed call), so no other worker's GPU work or host copies overlap them, and its death frees them."""
    pool = WorkerPool("host", prewarm=False, workdir=tmp_path)
    proc = pool.take("candidate")
    try:
        # Read once the worker has exec'd (a process between fork and exec shows an empty environ, and
        # in the runtime jail the worker is started by the jail's init).
        environ: list[bytes] = [b""]
        deadline = time.monotonic() + 30.0
        while not any(e.startswith(f"{LOCK_ENV}=".encode()) for e in environ) and time.monotonic() < deadline:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
            time.sleep(0.02)
        assert f"{LOCK_ENV}={pool.gpu_lock}".encode() in environ
        start_candidate(proc, _job(task, tmp_path, run_timing=True), None)
        result: dict[str, WorkerOutcome] = {}
        waiter = threading.Thread(
            target=lambda: result.update(out=finish_candidate(proc, _run(products["late_hang"]), 8.0, None))
        )
        waiter.start()
        # A function task's trials (where this candidate hangs) hold the GPU's lock, the uploads' and
        # the host memory's, all alone: a shared request is refused.
        locks = [lock_path(pool.gpu_lock, resource) for resource in RESOURCES]
        deadline = time.monotonic() + 7.0  # the worker's start-up (in its jail) and checks come first
        held: set[Path] = set()
        while held != set(locks) and time.monotonic() < deadline:
            for lock in locks:
                with lock.open("ab") as handle:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        fcntl.flock(handle, fcntl.LOCK_UN)
                    except BlockingIOError:
                        held.add(lock)
            time.sleep(0.05)
        assert held == set(locks), f"the running worker never held {sorted(set(locks) - held)}"
        waiter.join()
        assert result["out"].error is ErrorKind.TIMEOUT
        proc.kill()
        for lock in locks:  # free again once the worker is gone
            with lock.open("ab") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        proc.close()
        pool.close()
    # made by the worker's locks, removed with the pool
    assert not [path for path in lock_files(pool.gpu_lock) if path.exists()]


def test_a_check_run_behind_reports_the_first_failing_set(
    task: FunctionTask | KernelTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel's timing-size outputs are checked in a thread (Worker.check_behind) while it is timed;
    the verdict waits for those checks and reports the first set that failed."""
    use_worker_process(monkeypatch)  # a Worker in this process: no runner started from here
    job = _job(task, tmp_path)
    worker = Worker(job)
    worker.prepare()
    right = {a.name: worker.expected(0)[a.name].copy() for a in task.outputs}
    wrong = {a.name: worker.expected(1)[a.name].copy() for a in task.outputs}
    name = task.outputs[0].name
    wrong[name][len(wrong[name]) // 2] += 1.0
    worker.check_behind(0, right)
    assert worker.checks_behind_failure() is None
    assert worker.seconds["compare_behind"] > 0
    worker.check_behind(0, right)
    worker.check_behind(1, wrong)
    failed = worker.checks_behind_failure()
    assert failed is not None
    index, failure = failed
    assert index == 1 and failure.kind is ErrorKind.WRONG_OUTPUT
    assert failure.mismatch is not None and failure.mismatch.index == len(wrong[name]) // 2
    assert worker.checks_behind_failure() is None  # collected once


def test_a_worker_wakes_its_waiting_parent_when_its_result_is_written_or_it_dies(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """The parent sleeps on the worker's done pipe, not on a clock: a written result (or the worker's
    death, which closes the pipe) ends a sleep that would otherwise last 60 s. (A host worker exits
    right after its result; the note written with the result is checked on its own below.)"""
    for name, done in (("correct", "result"), ("segfault", "exit")):
        proc = WorkerProcess("candidate", "host", tmp_path)
        try:
            start_candidate(proc, _job(task, tmp_path), None)
            proc.send("run.json", _run(products[name]))
            # Each sleep must end before its 60 s when the worker finishes; how long the worker itself
            # takes (a loaded machine) is not what is checked.
            t0 = time.monotonic()
            while not proc.result_path.exists() and proc.proc.poll() is None:
                slept = time.monotonic()
                proc._sleep_until_done(60.0)
                assert time.monotonic() - slept < 55.0, f"{name}: the parent was not woken"
                assert time.monotonic() - t0 < 180.0, f"{name}: the worker never finished"
            assert proc.result_path.exists() if done == "result" else proc.proc.wait(10) != 0
        finally:
            proc.close()


def test_a_parent_that_saw_the_pipe_close_wakes_when_the_worker_is_gone(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """A dying worker's pipe closes before the process can be waited for: a parent that saw the close
    and sleeps again in that moment must be woken by the process's end, not sleep out its time (this
    made the test above sleep its whole 60 s now and then on a loaded machine)."""
    proc = WorkerProcess("candidate", "host", tmp_path)
    try:
        start_candidate(proc, _job(task, tmp_path), None)
        proc._close_done()  # as after the close was seen, the process not yet reaped
        proc.send("run.json", _run(products["segfault"]))
        slept = time.monotonic()
        proc._sleep_until_done(60.0)
        assert time.monotonic() - slept < 55.0, "the parent slept out its time"
        assert proc.proc.poll() is not None
    finally:
        proc.close()


def test_writing_a_result_notes_it_on_the_done_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU worker tears its context down after its result: the note on the pipe, not its exit, is
    what wakes the parent then."""
    read_end, write_end = os.pipe()
    try:
        monkeypatch.setenv(DONE_FD_ENV, str(write_end))
        write_result(str(tmp_path / "result.json"), FAST)
        os.set_blocking(read_end, False)  # nothing written: BlockingIOError, not a hang
        assert os.read(read_end, 16) == b"\n"
        assert EvaluationOptions.model_validate_json((tmp_path / "result.json").read_text()) == FAST
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_candidate_worker_reports_when_its_preparation_is_done(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """The evaluator takes its GPU lock for a candidate only once the worker has prepared the inputs
    (WorkerProcess.wait_prepared): a worker with a job reports it, a worker still waiting for its job
    does not, and the wait then ends at its timeout."""
    idle = WorkerProcess("candidate", "host", tmp_path)
    proc = WorkerProcess("candidate", "host", tmp_path)
    try:
        t0 = time.monotonic()
        assert not idle.wait_prepared(0.5)
        assert 0.5 <= time.monotonic() - t0 < 30.0
        start_candidate(proc, _job(task, tmp_path, run_timing=True), None)
        assert proc.wait_prepared(120.0)
        assert proc.stage_text() == "prepared" and not proc.result_path.exists()
        # ... and the run goes on from there
        assert finish_candidate(proc, _run(products["correct"]), 60.0, None).passed
    finally:
        idle.close()
        proc.close()


def test_a_run_lets_go_of_its_checks_lock_before_its_trials_take_theirs(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function task's correctness calls hold the locks shared and its trials alone (RunLocks): the
    first hold ends before the second begins (converting a held flock is not atomic), the candidate
    is checked under the first and timed under the second, and a failing check never takes the
    trials' lock. The reservation of the trials' locks is taken before the checks' and let go last."""
    # A Worker in this process: no runner started from here (it would write its stderr file in this
    # process's directory and make this process non-dumpable).
    use_worker_process(monkeypatch)
    events: list[str] = []

    def lock(name: str) -> Callable[[], contextlib.AbstractContextManager[None]]:
        @contextlib.contextmanager
        def hold() -> Iterator[None]:
            # whether the correctness stage had run when the lock was taken and when it was let go
            events.append(f"{name} taken, checked: {'correctness' in worker.seconds}")
            yield
            events.append(f"{name} let go, checked: {'correctness' in worker.seconds}")

        return hold

    worker = Worker(_job(task, tmp_path, run_timing=True))
    locks = RunLocks(checking=lock("checks"), timing=lock("trials"), reserve=lock("reserve"))
    outcome = worker.run(_run(products["correct"]), locks)
    assert outcome.passed and outcome.candidate_timing is not None, outcome.message
    assert events == [
        "reserve taken, checked: False",
        "checks taken, checked: False",
        "checks let go, checked: True",
        "trials taken, checked: True",
        "trials let go, checked: True",
        "reserve let go, checked: True",
    ]
    assert {"run_lock_wait", "timing_lock_wait"} <= set(outcome.seconds)
    events.clear()
    worker = Worker(_job(task, tmp_path, run_timing=True))
    failed = worker.run(_run(products["wrong"]), locks)
    assert failed.error is ErrorKind.WRONG_OUTPUT
    assert events == [
        "reserve taken, checked: False",
        "checks taken, checked: False",
        "checks let go, checked: True",
        "reserve let go, checked: True",
    ]


# Review 34: on its first call, a thread that sends the executor, over the worker's done channel and
# without end, records that each carry a descriptor of a file the candidate holds an exclusive flock on
# (on a GPU it could be a /dev/nvidia* descriptor, so its context). Records the executor had not read
# when it stopped the worker kept that file open, and the lock held, after kill() said the worker was
# gone: what the evaluator waits for before it lets the device's locks go (_let_go_when_gone).
PARKS = (
    "#include <atomic>\n#include <cerrno>\n#include <chrono>\n#include <thread>\n#include <cstdlib>\n#include <cstring>\n"
    "#include <fcntl.h>\n#include <unistd.h>\n"
    "#include <sys/file.h>\n#include <sys/socket.h>\n#include <sys/uio.h>\n"
    "static bool parking = false;\nstatic std::atomic<int> parked{0};\n"
    "static void park() {\n"
    '    const char* named = getenv("REGRAPH_DONE_FD"); if (!named) return;\n'
    "    int fd = atoi(named);\n"
    '    int held = open("parked.lock", O_CREAT | O_RDWR, 0644); if (held < 0) return;\n'
    "    flock(held, LOCK_EX);\n"
    "    std::thread([fd, held] {\n"
    "        for (;;) {\n"
    "            char line = '\\n'; struct iovec part = {&line, 1};\n"
    "            char room[CMSG_SPACE(sizeof(int))]; std::memset(room, 0, sizeof room);\n"
    "            struct msghdr m = {}; m.msg_iov = &part; m.msg_iovlen = 1;\n"
    "            m.msg_control = room; m.msg_controllen = sizeof room;\n"
    "            struct cmsghdr* c = CMSG_FIRSTHDR(&m); c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS;\n"
    "            c->cmsg_len = CMSG_LEN(sizeof(int)); std::memcpy(CMSG_DATA(c), &held, sizeof(int));\n"
    "            if (sendmsg(fd, &m, 0) >= 0) parked++;\n"
    "            else { if (errno == EPERM) parked = 64; write(fd, &line, 1); }  // EPERM: SO_PASSRIGHTS\n"
    "        }\n"
    "    }).detach();\n}\n"
    + HEAD
    + "if (!parking) { parking = true; park();\n"
    # the first call waits (2 s at most) until 64 were sent (or one refused): not a race with its end
    + "  for (int k = 0; k < 2000 && parked < 64; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(1)); }\n"
    + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }"
)


def test_a_descriptor_a_candidate_parks_in_the_done_channel_is_gone_with_the_worker(
    task: FunctionTask | KernelTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In its worker's process: a runner is not given the done channel (nor may it write its directory).
    use_worker_process(monkeypatch)
    product = build_host_candidates(tmp_path, {"parks": PARKS})["parks"]
    proc = WorkerProcess("candidate", "host", tmp_path)
    try:
        start_candidate(proc, _job(task, tmp_path), None)
        finish_candidate(proc, _run(product), 60, None)
        assert proc.kill(timeout_s=10), "the worker was not gone"
        lock = proc.dir / "parked.lock"
        assert lock.exists(), "the candidate never ran"
        # (where the kernel takes SO_PASSRIGHTS every send is refused, and nothing is parked at all)
        held = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: still held
        finally:
            os.close(held)
    finally:
        proc.close()
