"""The one way the executor asks ``nvidia-smi`` about the host's GPUs: the device's architecture
(:func:`executor.compile.device_arch`), the GPUs' PCI bus ids for a replica's cores
(:func:`executor.fleet.pinning.host_gpus`) and the device's description (:func:`executor.app.query_gpu`)
go through :func:`query_gpus`, with one time limit and one error path (review: three copies had each
their own, and a hung nvidia-smi held a start for 30 s each time with nothing said).

Without nvidia-smi on ``PATH`` (no GPU here) every query is empty, which is no error. Where it is there
but fails, hangs past :data:`SMI_TIMEOUT_S` (its whole process group is killed) or answers with no line
of the fields asked for, :func:`query_gpus` raises :class:`GpuQueryError`; a line among the rows that is
not one (a driver's warning) is skipped, so a query of one field (where any line is one) names another
with it. The callers, for whom a GPU they cannot ask about is one they cannot use, call
:func:`gpus_or_none`, which logs the error once per query and answers as without a GPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence

from executor.errors import GpuQueryError

logger = logging.getLogger(__name__)

# How long one nvidia-smi query may take: it answers in well under a second on a healthy host; a driver
# in trouble can leave it hanging for minutes.
SMI_TIMEOUT_S = 30.0
# How long the pipes of a killed nvidia-smi are read before they are let go.
KILLED_WAIT_S = 2.0

_said: set[tuple[str, ...]] = set()
_said_lock = threading.Lock()


def query_gpus(
    fields: Sequence[str], gpu_id: str | None = None, timeout_s: float = SMI_TIMEOUT_S
) -> list[list[str]]:
    """``nvidia-smi --query-gpu=<fields>`` (of GPU ``gpu_id`` only when given: nvidia-smi ignores
    ``CUDA_VISIBLE_DEVICES``): one row per GPU, each the fields' values in order, stripped, without
    units. Empty without nvidia-smi on ``PATH``. A line that is not one value per field (a driver's
    warning among the rows) is skipped and logged. :class:`GpuQueryError` when it fails, hangs past
    ``timeout_s`` (its process group killed; pipes that a process outside the group holds are let go
    after :data:`KILLED_WAIT_S`) or writes no line of one value per field."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    argv = [
        smi,
        *([f"--id={gpu_id}"] if gpu_id else []),
        f"--query-gpu={','.join(fields)}",
        "--format=csv,noheader,nounits",
    ]
    try:
        # Its own process group: a wrapper script's children go with it at the time limit (they would
        # otherwise hold the output pipe open, and the wait with it).
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as e:
        raise GpuQueryError(f"nvidia-smi did not start: {e}") from e
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.communicate(timeout=KILLED_WAIT_S)
        except subprocess.TimeoutExpired:
            # A process outside its group (one that called setsid) holds the pipes: they are let go
            # instead of waited for, which could be for ever (the executor's start waits on this).
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=KILLED_WAIT_S)
        raise GpuQueryError(f"nvidia-smi did not answer within {timeout_s:g}s") from None
    if proc.returncode != 0:
        said = (err.strip() or out.strip()).splitlines()
        raise GpuQueryError(f"nvidia-smi failed (status {proc.returncode}): {said[-1] if said else ''}"[:500])
    rows, strays = [], []
    for line in out.splitlines():
        if not line.strip():
            continue
        values = [value.strip() for value in line.split(",")]
        if len(values) == len(fields):
            rows.append(values)
        else:  # a line of its own among the rows (a driver's warning: "infoROM is corrupted at gpu ...")
            strays.append(line.strip()[:200])
    if strays and not rows:
        raise GpuQueryError(f"nvidia-smi answered {strays[0]!r} for the fields {', '.join(fields)}")
    if strays:
        logger.info("nvidia-smi: lines that are no GPU's %s skipped: %s", ", ".join(fields), strays)
    return rows


def gpus_or_none(fields: Sequence[str], gpu_id: str | None = None) -> list[list[str]]:
    """:func:`query_gpus`, empty (as without a GPU) when it raises: the error is logged, once per set
    of fields."""
    try:
        return query_gpus(fields, gpu_id)
    except GpuQueryError as e:
        with _said_lock:
            first = tuple(fields) not in _said
            _said.add(tuple(fields))
        logger.log(logging.WARNING if first else logging.DEBUG, "%s: taken as no GPU", e)
        return []
