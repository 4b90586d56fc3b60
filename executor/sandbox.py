"""Running a worker job in an isolated process: own process group, wall-clock limit, memory watch.

Whatever the candidate does (segfault, abort, infinite loop, runaway allocation, sticky CUDA error),
the worker process takes the hit; this module turns its fate into a :class:`WorkerOutcome` and the
service keeps serving.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from executor.errors import WorkerError
from executor.verdict import ErrorKind
from executor.worker import WorkerJob, WorkerOutcome

logger = logging.getLogger(__name__)

POLL_S = 0.05
STDERR_TAIL = 4000


def _rss_bytes(pid: int) -> int:
    """Resident memory of a process and its children's group is hard to sum cheaply; the worker is
    one process, so its VmRSS is what counts."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return 0
    return 0


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_job(
    job: WorkerJob, timeout_s: float, memory_limit_bytes: int | None = None, workdir: Path | None = None
) -> WorkerOutcome:
    """Run ``job`` in a fresh worker process and return its outcome, including crash and timeout."""
    with tempfile.TemporaryDirectory(dir=workdir, prefix="regraph-worker-") as tmp:
        tmpdir = Path(tmp)
        job_path, result_path = tmpdir / "job.json", tmpdir / "result.json"
        progress = tmpdir / "progress"
        job = job.model_copy(
            update={"memory_limit_bytes": memory_limit_bytes, "progress_path": str(progress)}
        )
        job_path.write_text(job.model_dump_json())
        stderr_path = tmpdir / "stderr"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
        )
        start = time.monotonic()
        with stderr_path.open("wb") as err:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "executor.worker", str(job_path), str(result_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=err,
                    stderr=err,
                    cwd=tmpdir,
                    env=env,
                    start_new_session=True,
                )
            except OSError as e:
                raise WorkerError(f"cannot start a worker: {e}") from e
            killed_for: ErrorKind | None = None
            try:
                while proc.poll() is None:
                    if time.monotonic() - start > timeout_s:
                        killed_for = ErrorKind.TIMEOUT
                        _kill_group(proc)
                        break
                    if (
                        memory_limit_bytes is not None
                        and job.runtime == "gpu"
                        and _rss_bytes(proc.pid) > memory_limit_bytes
                    ):
                        killed_for = ErrorKind.OUT_OF_MEMORY
                        _kill_group(proc)
                        break
                    time.sleep(POLL_S)
            finally:
                if proc.poll() is None:  # interrupted (e.g. service shutdown): never leave a worker behind
                    _kill_group(proc)
            # Anything the candidate forked into the group goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        elapsed = time.monotonic() - start
        stage_text = progress.read_text() if progress.exists() else "startup"
        stage: Literal["correctness", "timing"] = (
            "timing" if stage_text in ("timing", "baseline", "reference_timing") else "correctness"
        )
        stderr_tail = stderr_path.read_bytes()[-STDERR_TAIL:].decode("utf-8", "replace")
        if killed_for is ErrorKind.TIMEOUT:
            return WorkerOutcome(
                passed=False,
                stage=stage,
                error=ErrorKind.TIMEOUT,
                message=f"killed after {timeout_s:.0f}s during {stage_text}",
                seconds={stage: elapsed},
            )
        if killed_for is ErrorKind.OUT_OF_MEMORY:
            return WorkerOutcome(
                passed=False,
                stage=stage,
                error=ErrorKind.OUT_OF_MEMORY,
                message=f"worker exceeded {memory_limit_bytes} bytes of host memory during {stage_text}",
                seconds={stage: elapsed},
            )
        if result_path.exists():
            return WorkerOutcome.model_validate_json(result_path.read_text())
        code = proc.returncode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            what = f"worker died from {name} during {stage_text}"
        else:
            what = f"worker exited with status {code} during {stage_text} without a result"
        kind = (
            ErrorKind.OUT_OF_MEMORY
            if "MemoryError" in stderr_tail or "std::bad_alloc" in stderr_tail
            else ErrorKind.CRASH
        )
        logger.info("%s", what)
        return WorkerOutcome(
            passed=False,
            stage=stage,
            error=kind,
            message=f"{what}\n{stderr_tail.strip()[-1500:]}".strip(),
            seconds={stage: elapsed},
        )
