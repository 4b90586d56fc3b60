"""The device's figures for the physical floor (:mod:`executor.floor`), measured where no candidate's
code runs and kept by the executor alone.

A candidate worker runs the candidate's code in its own process, so nothing it writes or measures
may bound a later candidate: a record of a much faster device, left in the store, would lower every
later floor until a hack passed as plausible. So the executor measures each device once per process,
the first time a candidate needs it, in a worker of its own (``python -m executor.worker peak``: the
same jail, the trials' locks held, no candidate library loaded), checks the figures against the
datasheet table (:func:`executor.floor.believed`), keeps them as the device's record
(``<cache_dir>/device-peak/``, which ``GET /v1/device`` shows, checked again on read) and hands them to
every candidate worker in its job. The candidate workers never see the record's directory.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from pathlib import Path

from executor import floor
from executor.errors import ExecutorError
from executor.sandbox import WorkerPool
from executor.verdict import DevicePeak

logger = logging.getLogger(__name__)

# How long the measuring worker may take (its start, a CUDA context, the locks, the copies).
MEASURE_TIMEOUT_S = 120.0
# A failed measurement is tried again after this long (meanwhile the datasheet's figures bound).
RETRY_AFTER_S = 300.0

_lock = threading.Lock()
# (runtime, GPU lock) -> (the figures, when measured); the directories they were kept in.
_measured: dict[tuple[str, str], tuple[DevicePeak, float]] = {}
_kept: set[tuple[str, str, Path]] = set()


def measure(pool: WorkerPool) -> DevicePeak:
    """Run one measuring worker for ``pool``'s runtime and device; its figures as believed, or the
    datasheet's (an unknown GPU's name: the table's fastest) when it fails."""
    name = "host" if pool.runtime == "host" else "GPU"
    try:
        proc = pool.start_command("peak")
    except (ExecutorError, OSError) as e:  # the worker could not start
        return floor.datasheet_peak(name, note=f"probe failed: {e}")
    try:
        try:
            proc.proc.wait(timeout=MEASURE_TIMEOUT_S)
            read = proc.read_result(DevicePeak)  # as every worker's result is read (review 41 H1)
            if read is None:
                raise ValueError("the measuring worker left no result")
            peak = read
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            tail = proc.stderr_tail().strip()[-500:]
            logger.warning("the device's figures could not be measured: %s %s", e, tail)
            return floor.datasheet_peak(name, note=f"probe failed: {e}")
    finally:
        proc.close()
    return floor.believed(peak, peak.name)


def device_peak(pool: WorkerPool, cache_dir: Path) -> DevicePeak:
    """The figures a candidate of ``pool``'s runtime is bounded by: measured once per process and
    device (:func:`measure`, again after :data:`RETRY_AFTER_S` when that failed), kept under
    ``cache_dir`` as the device's record."""
    key = (pool.runtime, str(pool.gpu_lock) if pool.runtime == "gpu" else "")  # one host, one GPU each
    with _lock:
        known = _measured.get(key)
        if known is None or (known[0].source != "measured" and time.monotonic() - known[1] > RETRY_AFTER_S):
            known = _measured[key] = (measure(pool), time.monotonic())
        peak = known[0]
        directory = cache_dir / "device-peak"
        if peak.source == "measured" and (*key, directory) not in _kept:
            floor.keep_peak(directory, peak)
            _kept.add((*key, directory))
    return peak
