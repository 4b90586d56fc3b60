"""What the executor reads of the files in a worker's directory, which belongs to the worker's uid.

Code loaded in a worker (a function candidate in its worker's process, an inline task's reference) may
remove ``progress``, ``stderr`` or ``result.json`` and put a link or a FIFO in its place. The executor,
as root, opened them by path (review 41 H1): a link to a root-only file put that file's content in the
verdict ("worker exited with status 1 during <the file>"), its size ("[N bytes written after the
candidate was loaded are not shown]"), or let its content choose ``out_of_memory`` over ``crash``; a
FIFO blocked the evaluation's thread until someone opened it for writing. Now the log is read through
the executor's own descriptor (opened when the worker was started), the other files are opened without
following a link and without blocking and read only when they are plain files, and a verdict names only
the stages the workers report. Real workers of the test-only ``host`` runtime, in the jail this host
gives them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from executor.jail import is_root
from executor.reference import build_reference
from executor.sandbox import (
    WorkerProcess,
    _job_dirs,
    finish_reference,
    start_reference,
    worker_protection,
)
from executor.taskformat import load_task, parse_task
from executor.verdict import ErrorKind
from executor.worker.messages import ReferenceJob, ReferenceOutcome, WorkerOutcome
from tests.support.hostcode import FAST, FIXTURE_TASKS, run_saxpy_job, saxpy_worker_job, use_worker_process

pytestmark = pytest.mark.skipif(not is_root(), reason="the files belong to the executor's own uid")

T = TypeVar("T")
SECRET = "TOP-SECRET-ROOT-ONLY-CONTENT"
# The root-only file's size: a number that a verdict must not give (nor one near it).
SECRET_BYTES = 123_456

SAXPY = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
SAXPY_BODY = "  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
# replace(NAME, TARGET): the file NAME of the caller's worker directory (found from its log, the
# worker's stderr) removed and a link to TARGET put in its place; a FIFO when TARGET is null; a plain
# file holding TEXT with write_as(NAME, TEXT).
REPLACE = r"""
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
static bool sibling(const char* name, char* path, size_t size) {
    ssize_t k = readlink("/proc/self/fd/2", path, size - 1);
    if (k <= 0) return false;
    path[k] = 0;
    char* slash = std::strrchr(path, '/');
    if (slash == nullptr || (slash - path) + 1 + std::strlen(name) >= size) return false;
    std::strcpy(slash + 1, name);
    return true;
}
static void replace(const char* name, const char* target) {
    char path[4096];
    if (!sibling(name, path, sizeof path)) return;
    unlink(path);
    if (target != nullptr) symlink(target, path); else mkfifo(path, 0666);
}
static void write_as(const char* name, const char* text) {
    char path[4096];
    if (!sibling(name, path, sizeof path)) return;
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { write(fd, text, std::strlen(text)); close(fd); }
}
"""


def _candidate(*calls: str) -> str:
    """saxpy that makes ``calls`` (of :data:`REPLACE`'s) and exits with status 1 without a result."""
    body = "".join(f"  {c};\n" for c in calls)
    return REPLACE + SAXPY + body + "  _exit(1);\n" + SAXPY_BODY


@pytest.fixture
def job_dir() -> Iterator[Path]:
    """The jobs' files, where a jailed worker's uid may pass; removed after."""
    path = Path(tempfile.mkdtemp(prefix="regraph-test-dirfiles-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A root-only file (under pytest's 0700 directory, itself 0600) of :data:`SECRET_BYTES` bytes that
    holds :data:`SECRET` and what would make a log read as an out-of-memory death."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    path = private / "secret"
    text = f"{SECRET}\nMemoryError\n".encode()
    path.write_bytes((text * (SECRET_BYTES // len(text) + 1))[:SECRET_BYTES])
    path.chmod(0o600)
    return path


def _free(procs: list[WorkerProcess]) -> None:
    """Open for writing every FIFO in the workers' directories: a thread blocked opening one to read
    goes on."""
    for proc in procs:
        for entry in proc.dir.iterdir():
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(entry.lstat().st_mode):
                    os.close(os.open(entry, os.O_WRONLY | os.O_NONBLOCK))


def _watched(run: Callable[[list[WorkerProcess]], T], limit_s: float = 60.0) -> T:
    """``run``'s value, run in a thread that must end within ``limit_s`` (else the test fails, after
    freeing the thread: :func:`_free`); ``run`` adds its workers to the list it is given."""
    procs: list[WorkerProcess] = []
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = run(procs)
        except BaseException as e:  # handed to the test's thread
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        _free(procs)
        thread.join(30)
        pytest.fail(f"the evaluation's thread was still blocked after {limit_s:.0f}s")
    if "error" in box:
        raise box["error"]
    return cast("T", box["value"])


def _candidate_run(job_dir: Path, source: str) -> WorkerOutcome:
    """saxpy's ``source`` in a candidate worker (in the worker's process), handed over as the evaluator
    does, in a thread watched by :func:`_watched`."""
    job, product = saxpy_worker_job(job_dir, source)

    def run(procs: list[WorkerProcess]) -> WorkerOutcome:
        proc = WorkerProcess("candidate", "host", binds=_job_dirs(job))
        procs.append(proc)
        try:
            return run_saxpy_job(proc, job, product)
        finally:
            proc.close()

    return _watched(run)


def _assert_nothing_of(message: str) -> None:
    """``message`` shows neither the root-only file's content nor its size."""
    assert SECRET not in message, message
    after = re.search(r"\[(\d+) bytes written after", message)
    assert after is None or int(after.group(1)) < SECRET_BYTES // 2, message


@pytest.fixture
def in_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Function candidates run in their worker's process (where its files are within their reach);
    only under a jail (without one the worker is the executor's uid)."""
    if worker_protection("host") == "none":
        pytest.skip("no runtime jail here")
    use_worker_process(monkeypatch)


@pytest.mark.usefixtures("in_worker")
def test_a_link_as_progress_does_not_show_the_file_it_points_to(job_dir: Path, secret: Path) -> None:
    outcome = _candidate_run(job_dir, _candidate(f'replace("progress", "{secret}")'))
    assert outcome.error is ErrorKind.CRASH, outcome.message
    _assert_nothing_of(outcome.message)
    assert "worker exited with status 1 during an unknown stage without a result" in outcome.message


@pytest.mark.usefixtures("in_worker")
def test_a_link_as_the_log_shows_neither_the_files_content_nor_its_size(job_dir: Path, secret: Path) -> None:
    outcome = _candidate_run(job_dir, _candidate(f'replace("stderr", "{secret}")'))
    # the kind too: the file says "MemoryError", which in the worker's own log means out_of_memory
    assert outcome.error is ErrorKind.CRASH, outcome.message
    _assert_nothing_of(outcome.message)
    assert "[candidate ran " in outcome.message, outcome.message  # the log as it was at the hand-over


@pytest.mark.usefixtures("in_worker")
def test_a_link_as_the_result_is_no_result(job_dir: Path, secret: Path) -> None:
    try:
        outcome = _candidate_run(job_dir, _candidate(f'replace("result.json", "{secret}")'))
    except Exception as e:  # whatever it is, it must not carry the file
        assert SECRET not in str(e), str(e)
        raise
    assert outcome.error is ErrorKind.CRASH, outcome.message
    _assert_nothing_of(outcome.message)
    assert "without a result" in outcome.message, outcome.message


@pytest.mark.usefixtures("in_worker")
@pytest.mark.parametrize("name", ["progress", "result.json"])
def test_a_fifo_in_the_workers_directory_blocks_nothing(job_dir: Path, name: str) -> None:
    outcome = _candidate_run(job_dir, _candidate(f'replace("{name}", nullptr)'))
    assert outcome.error is ErrorKind.CRASH, outcome.message
    assert "without a result" in outcome.message, outcome.message


@pytest.mark.usefixtures("in_worker")
def test_a_verdict_names_only_the_stages_workers_report(job_dir: Path) -> None:
    outcome = _candidate_run(job_dir, _candidate('write_as("progress", "words of the candidate")'))
    assert outcome.error is ErrorKind.CRASH, outcome.message
    assert "words of the candidate" not in outcome.message, outcome.message
    assert "during an unknown stage" in outcome.message, outcome.message


def test_an_inline_reference_cannot_read_through_its_workers_files(job_dir: Path, secret: Path) -> None:
    """A reference worker is never handed over: its whole log is its own and may be shown, so the log
    read through a link was the root-only file itself."""
    if worker_protection("none", "reference") == "none":
        pytest.skip("no runtime jail here")
    job_dir.chmod(0o755)
    saxpy = load_task(FIXTURE_TASKS / "saxpy")
    calls = f'replace("progress", "{secret}"); replace("stderr", "{secret}");'
    source = REPLACE + SAXPY + f"  {calls}\n  _exit(1);\n" + SAXPY_BODY
    inline = parse_task(
        {**saxpy.model_dump(mode="json"), "id": f"inline_{uuid.uuid4().hex[:6]}", "reference_source": source}
    )
    library = build_reference(inline, job_dir / "cache")
    job = ReferenceJob(
        task=inline, reference_library=str(library), seeds=[11, 22, 33, 44], options=FAST, out_dir=""
    )

    def run(procs: list[WorkerProcess]) -> ReferenceOutcome:
        proc = WorkerProcess("reference", "none")
        procs.append(proc)
        try:
            start_reference(proc, job, None)
            return finish_reference(proc, timeout_s=120)
        finally:
            proc.close()

    outcome = _watched(run)
    assert not outcome.ok
    _assert_nothing_of(outcome.message)
    assert "during an unknown stage" in outcome.message, outcome.message
