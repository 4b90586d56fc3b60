"""What a crash verdict shows of a candidate worker's log: the worker's own output up to the hand-over
of the candidate (a start-up failure's cause), never what came after (the candidate's to choose).

A worker whose start failed (under the ``uid`` protection: "Permission denied" on the reference's
library) died while the executor handed it the candidate, so its traceback counted as written after the
hand-over and was hidden: the verdict said only "worker exited with status 1 during startup". The
candidate is now handed over once the worker is prepared (or gone), as the evaluator does; and what the
worker wrote before is read at the hand-over, since the candidate holds the log's descriptor and could
write over it. Real workers of the test-only ``host`` runtime, in the jail this host gives them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.jail import is_root
from executor.sandbox import WorkerProcess, _job_dirs, worker_protection
from executor.verdict import ErrorKind
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import run_saxpy_job, saxpy_worker_job, use_worker_process

SAXPY = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
SAXPY_BODY = "  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
# saxpy that writes a "secret" over the start of its worker's log (the descriptor it inherited, not
# opened to append) and exits: what a verdict must not show.
OVERWRITER = (
    "#include <unistd.h>\n#include <cstring>\n"
    + SAXPY
    + '  const char* s = "SECRET-READ-BY-THE-CANDIDATE\\n";\n'
    + "  lseek(2, 0, SEEK_SET);\n  write(2, s, std::strlen(s));\n  _exit(1);\n"
    + SAXPY_BODY
)


@pytest.fixture
def job_dir() -> Iterator[Path]:
    """The jobs' files, where a jailed worker's uid may pass (not pytest's tmp_path, under a 0700
    directory); removed after."""
    path = Path(tempfile.mkdtemp(prefix="regraph-test-start-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(job_dir: Path, source: str, unreadable_reference: bool = False) -> WorkerOutcome:
    """saxpy's ``source`` in a candidate worker, its job and candidate handed over at once (as
    ``run_job`` does); the reference's library unreadable to the worker's uid if asked."""
    job, product = saxpy_worker_job(job_dir, source)
    if unreadable_reference:  # the executor's alone (built in the compile jail, it was the jail's uid's)
        os.chown(job.reference_library, os.getuid(), os.getgid())
        Path(job.reference_library).chmod(0o600)
    proc = WorkerProcess("candidate", "host", binds=_job_dirs(job))
    try:
        return run_saxpy_job(proc, job, product)
    finally:
        proc.close()


@pytest.mark.skipif(not is_root(), reason="the worker runs as the executor's uid, which reads its files")
def test_a_worker_that_cannot_open_the_reference_library_says_why(job_dir: Path) -> None:
    if worker_protection("host") == "none":
        pytest.skip("no runtime jail here")
    outcome = _run(job_dir, SAXPY + SAXPY_BODY, unreadable_reference=True)
    assert outcome.error is ErrorKind.CRASH, outcome.message
    assert "worker exited with status 1 during startup" in outcome.message, outcome.message
    assert "cannot open shared object file: Permission denied" in outcome.message, outcome.message
    assert "not shown" not in outcome.message, outcome.message


def test_what_the_candidate_writes_over_the_workers_log_is_not_shown(
    job_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_worker_process(monkeypatch)  # the candidate in its worker's process: its log's descriptor
    outcome = _run(job_dir, OVERWRITER)
    assert outcome.error is ErrorKind.CRASH, outcome.message
    assert "SECRET" not in outcome.message, outcome.message
    assert "[candidate ran " in outcome.message, outcome.message  # the log's first line, as it was
