"""The physical floor of a timed call: the least time any correct implementation of a task can take.

A candidate that is timed faster than this did not do the task's work in the timed call (it answered
from memory, skipped the work, or fooled the clock): its verdict is ``implausible`` with both numbers.

What a correct implementation must do, counted from the task's arguments at the timing size:

* read every ``in`` and ``inout`` array and write every ``out`` and ``inout`` array once;
* a **kernel task** (timed with CUDA events after an L2 flush) moves those bytes through device
  memory: ``latency + read / dram + max(0, written - L2) / dram`` (written bytes may stay in L2 when
  the launch ends, so up to the L2's size is not counted);
* a **function task on the GPU** (timed on the host clock, its copies included) either copies its
  inputs to the device and its outputs back (``read / h2d + written / d2h``) or computes on the host
  (``beyond the host cache / host memory bandwidth + within it / HOST_CACHE_GBPS``): the floor is the smaller of the
  two, plus the launch latency;
* a **function task on the host runtime** (tests) pays the host path alone.

The bandwidths and the launch latency are measured once per device by a worker that loads no
candidate's code (:mod:`executor.peak`; the executor alone keeps them, as JSON under its cache, and
hands them to every candidate worker in its job) and given headroom (:data:`HEADROOM`,
:data:`HOST_HEADROOM`, :data:`LATENCY_SHARE`), so that a kernel that beats a plain copy by a few
percent is never called implausible; a known device's figures are never taken below its datasheet's
(:func:`never_above_datasheet`: a disturbed probe must not raise every later candidate's floor). When
the probe fails, the figures come from a datasheet table by device name (:data:`DATASHEET`), and an
unknown name gets the fastest entry of the table: a weak floor, never none. Figures are believed only
when they are plausible against that table (:func:`unbelievable`: at most :data:`BELIEVED` times its
bandwidths, a launch latency of at least :data:`MIN_LAUNCH_US`): a kept file written by anyone else
cannot lower the floor. A task whose sizes cannot be evaluated gets no floor, and the verdict says so.

Not bounded: a task that need not read all of its inputs (a search that stops early, a sparse access)
has a floor that is too high for it; such a task should be evaluated with ``physical_floor: false``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask
from executor.verdict import PEAK_FORMAT, DevicePeak, FloorCheck

logger = logging.getLogger(__name__)

# Bandwidths are multiplied by this before they bound a candidate: a kernel may beat the probe's plain
# copy by some percent (better access patterns, the probe's own overhead).
HEADROOM = 1.25
# Host memory: the probe is one thread's copy, and a loop that mostly reads streams far faster than a
# copy does (saxpy's honest loop read 48 MB at 40 GB/s where the probe, under the test machine's load,
# measured 6.5 GB/s by the wall clock; timed by the thread's CPU time since session 36, load no longer
# lowers it: executor.worker.host.measure_host_gbps). The host path bounds only the grossest fakes
# (answers from memory in microseconds where the data takes milliseconds to read).
HOST_HEADROOM = 8.0
# Bytes that may sit in the host's last-level cache are still read, at most this fast (GB/s): above the
# aggregate last-level-cache bandwidth of any server CPU. Without it a task whose data fits in a large
# cache (300 MiB on the H200 hosts) had no host floor at all, and a candidate answering from memory in
# 20 us passed a 256 MB sum (session 15's corpus run: fn_value_memo_all, floor 0.001 ms).
HOST_CACHE_GBPS = 2000.0
# Only this share of the measured launch latency is counted (the probe's operation is not a kernel).
LATENCY_SHARE = 0.5

# Datasheet figures: (name fragment, DRAM GB/s, host link GB/s per direction); the first fragment found
# in the device's name wins, so the more specific names come first. Sources: the vendors' datasheets
# (H200: 4.8 TB/s HBM3e; H100 SXM 3.35 TB/s, PCIe 2.0 TB/s, NVL 3.9 TB/s; GH200 4.9 TB/s with a
# 450 GB/s NVLink-C2C per direction; A100 80GB 2.0 TB/s, 40GB 1.56 TB/s; B200 8 TB/s; L40S 864 GB/s;
# L4 300 GB/s; A10 600 GB/s; V100 900 GB/s; RTX 4090 1.0 TB/s); PCIe 5.0 x16 64 GB/s, 4.0 x16 32 GB/s,
# 3.0 x16 16 GB/s per direction.
DATASHEET: list[tuple[str, float, float]] = [
    ("GH200", 4900.0, 450.0),
    ("H200", 4800.0, 64.0),
    ("H100 NVL", 3900.0, 64.0),
    ("H100 PCIe", 2000.0, 64.0),
    ("H100", 3350.0, 64.0),
    ("B200", 8000.0, 64.0),
    ("A100 80GB", 2039.0, 32.0),
    ("A100", 1555.0, 32.0),
    ("L40S", 864.0, 32.0),
    ("L4", 300.0, 32.0),
    ("A10", 600.0, 32.0),
    ("V100", 900.0, 16.0),
    ("RTX 4090", 1008.0, 32.0),
]
# An unknown device: the fastest figures of the table (the weakest floor), a typical launch latency.
DEFAULT_LAUNCH_US = 2.0
# Host memory of an unknown host: a fast server socket.
DEFAULT_HOST_GBPS = 400.0
# Figures above this many times the table's (the device's row, else the fastest) are not believed: a
# plain copy never beats the datasheet by that much, so such a record was not measured here (a file
# planted in the store, or written by an older version whose candidate workers could write there).
BELIEVED = 1.25
# A launch latency below this (microseconds) is not believed on a GPU (an event-timed operation).
MIN_LAUNCH_US = 0.5
# Caches larger than these are not believed (bytes that fit in a cache count at a higher speed).
MAX_L2_BYTES = 1 << 30
MAX_HOST_CACHE_BYTES = 4 << 30


def datasheet_peak(name: str, l2_bytes: int = 0, host_cache_bytes: int = 0, note: str = "") -> DevicePeak:
    """The datasheet figures of the device called ``name``; the table's fastest for an unknown one."""
    known = [(d, k) for fragment, d, k in DATASHEET if fragment.lower() in name.lower()]
    source: Literal["datasheet", "default"] = "datasheet" if known else "default"
    dram, link = known[0] if known else (max(d for _, d, _ in DATASHEET), max(k for _, _, k in DATASHEET))
    return DevicePeak(
        name=name,
        dram_gbps=dram,
        launch_us=DEFAULT_LAUNCH_US,
        h2d_gbps=link,
        d2h_gbps=link,
        host_gbps=DEFAULT_HOST_GBPS,
        l2_bytes=l2_bytes,
        host_cache_bytes=host_cache_bytes,
        source=source,
        note=note,
    )


def never_above_datasheet(peak: DevicePeak) -> DevicePeak:
    """A measured device's figures, made no stricter than its datasheet's: a probe disturbed by other
    work (another process's kernels, a candidate's leftovers) measures less bandwidth or more latency,
    which would raise the floor for every later candidate. Unknown devices keep what was measured."""
    if peak.source != "measured":
        return peak
    sheet = datasheet_peak(peak.name)
    if sheet.source != "datasheet":
        return peak
    return peak.model_copy(
        update={
            "dram_gbps": max(peak.dram_gbps, sheet.dram_gbps),
            "h2d_gbps": max(peak.h2d_gbps, sheet.h2d_gbps),
            "d2h_gbps": max(peak.d2h_gbps, sheet.d2h_gbps),
            "launch_us": min(peak.launch_us, sheet.launch_us),
        }
    )


def unbelievable(peak: DevicePeak, name: str) -> str | None:
    """Why the figures ``peak`` cannot be the device called ``name``'s (None when they can): another
    format or device, a figure that is not a finite positive number, or one that would lower the floor
    below what the table (:data:`DATASHEET`) allows, by more than :data:`BELIEVED`."""
    if peak.format != PEAK_FORMAT or peak.name != name:
        return f"the record is of {peak.name!r} ({peak.format}), not of {name!r}"
    sheet = datasheet_peak(name)
    limits = {
        "dram_gbps": sheet.dram_gbps,
        "h2d_gbps": sheet.h2d_gbps,
        "d2h_gbps": sheet.d2h_gbps,
        "host_gbps": sheet.host_gbps,
    }
    for field, limit in limits.items():
        value = getattr(peak, field)
        if not (math.isfinite(value) and 0 < value <= limit * BELIEVED):
            return f"{field} = {value} is not plausible (the table allows {limit * BELIEVED:g})"
    low = MIN_LAUNCH_US if name != "host" else 0.0  # the host runtime launches nothing
    if not (math.isfinite(peak.launch_us) and low <= peak.launch_us < 1e6):
        return f"launch_us = {peak.launch_us} is not plausible (at least {low:g})"
    if not (0 <= peak.l2_bytes <= MAX_L2_BYTES and 0 <= peak.host_cache_bytes <= MAX_HOST_CACHE_BYTES):
        return f"the caches ({peak.l2_bytes}, {peak.host_cache_bytes} bytes) are not plausible"
    return None


def believed(peak: DevicePeak, name: str) -> DevicePeak:
    """``peak`` when it is plausible for the device called ``name`` (:func:`unbelievable`), else the
    datasheet's figures, which say why."""
    reason = unbelievable(peak, name)
    if reason is None:
        return peak
    logger.warning("the figures of %s are not believed; the datasheet's bound it: %s", name, reason)
    sheet = datasheet_peak(name, note=f"not believed: {reason}")
    # the device is still the one measured: its model names the host's baseline timings
    return sheet.model_copy(update={"model": peak.model}) if peak.name == name else sheet


def _path(directory: Path, name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "device"
    return directory / f"{slug}.json"


def stored_peak(directory: Path, name: str) -> DevicePeak | None:
    """The figures kept for the device called ``name`` under ``directory`` (the device's record, which
    ``GET /v1/device`` shows); None before they were first measured, or when unreadable or not
    plausible (:func:`unbelievable`: not written by this executor)."""
    try:
        kept = DevicePeak.model_validate_json(_path(directory, name).read_text())
    except (OSError, ValueError):
        return None
    reason = unbelievable(kept, name)
    if reason is not None:
        logger.warning("the kept figures of %s are not believed: %s", name, reason)
        return None
    return kept


def keep_peak(directory: Path, peak: DevicePeak) -> None:
    """Keep ``peak`` under ``directory`` (atomically), a directory only this process's user may write
    (one that an older version opened to the jailed workers is taken back)."""
    tmp: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if directory.stat().st_uid != os.geteuid():
            os.chown(directory, os.geteuid(), os.getegid())
        directory.chmod(0o755)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".peak-")
        with os.fdopen(fd, "w") as f:
            f.write(peak.model_dump_json())
        os.chmod(tmp, 0o644)
        os.replace(tmp, _path(directory, peak.name))
    except OSError as e:
        logger.warning("could not keep the device's figures: %s", e)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def device_peak(directory: Path | None, name: str, measure: Callable[[], DevicePeak]) -> DevicePeak:
    """The device's figures: read from ``directory`` when measured before (and plausible), else
    measured now (and kept there when plausible); a failed probe gives the datasheet's (not kept, so
    the next call measures again). Only the executor keeps figures (:mod:`executor.peak`): a candidate
    worker passes no directory."""
    if directory is not None and (kept := stored_peak(directory, name)) is not None:
        return kept
    try:
        peak = measure()
    except Exception as e:  # any probe failure falls back to the table, never to no check
        logger.warning("the bandwidth probe failed on %s; the datasheet's figures bound it: %s", name, e)
        return datasheet_peak(name, note=f"probe failed: {e}")
    peak = believed(peak, name)
    if directory is not None and peak.source == "measured":
        keep_peak(directory, peak)
    return peak


def task_bytes(task: FunctionTask | KernelTask) -> tuple[int, int]:
    """The bytes a correct implementation must read (``in``/``inout``) and write (``out``/``inout``)
    at the timing size; raises ValueError when a size cannot be evaluated."""
    read = written = 0
    for arg in task.arrays:
        try:
            nbytes = task.array_length(arg, "timing") * NUMPY_DTYPES[arg.dtype]().itemsize
        except Exception as e:  # any failure to size an array means: no floor
            raise ValueError(f"the size of {arg.name!r} is unknown: {e}") from e
        if arg.intent in ("in", "inout"):
            read += nbytes
        if arg.intent in ("out", "inout"):
            written += nbytes
    return read, written


def _ms(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e9) * 1e3 if gbps > 0 else 0.0


def physical_floor(
    task: FunctionTask | KernelTask,
    peak: DevicePeak,
    runtime: Literal["kernel", "gpu_function", "host_function"],
) -> FloorCheck:
    """The floor of one timed call of ``task`` on the device ``peak`` describes (see the module)."""
    try:
        read, written = task_bytes(task)
    except ValueError as e:
        return FloorCheck(reason=f"no floor: {e}", source=peak.source)
    peak = never_above_datasheet(peak)
    latency = peak.launch_us * LATENCY_SHARE / 1e3
    cached = min(read + written, peak.host_cache_bytes)
    host_path = _ms(read + written - cached, peak.host_gbps * HOST_HEADROOM) + _ms(cached, HOST_CACHE_GBPS)
    if runtime == "kernel":
        floor = latency + _ms(read + max(0, written - peak.l2_bytes), peak.dram_gbps * HEADROOM)
        path = "device"
    elif runtime == "gpu_function":
        copies = _ms(read, peak.h2d_gbps * HEADROOM) + _ms(written, peak.d2h_gbps * HEADROOM)
        path = "host copies" if copies <= host_path else "host memory"
        floor = latency + min(copies, host_path)
    else:
        floor, path = host_path, "host memory"
    return FloorCheck(floor_ms=floor, read_bytes=read, written_bytes=written, path=path, source=peak.source)


def implausible_message(check: FloorCheck) -> str:
    """The verdict's message for a candidate timed below its floor."""
    return (
        f"timed at {check.measured_ms:.4g} ms per call, below the physical floor of {check.floor_ms:.4g} ms "
        f"({check.read_bytes} bytes read and {check.written_bytes} written, bounded by the {check.path}, "
        f"{check.source} figures): no correct implementation runs this fast, so the timed calls did not "
        "do the task's work"
    )
