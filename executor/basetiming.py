"""The naive-baseline timings of the tasks, kept on disk per device model and shared by the host's executors.

A function task's ``naive.cu`` baseline is timed under the GPU lock (as many trials as a candidate's,
plus copies of the timing sets of its own: 0.5-1 s on an H200). Its result depends on the task, the
baseline's source, the timing options and the device, never on the candidate, so it is measured once
and reused: by the evaluator's own memory, and, through the files here, by the other replicas of the
host (each used to time every task again: 104 baseline timings for 70 tasks on two H200s,
bench/results/2026-11-29_s18/lock_time_analysis.md) and by the executor after a restart.

Only a timing measured by a baseline worker, a process that loaded no candidate's code
(:mod:`executor.baseline`), is kept: each file names its source, and one that names another (or
none: written before the baseline had a worker of its own, when it was timed in the candidate's
process) is not read.

An entry is used only for the same device model (the name the worker reports, e.g.
``NVIDIA H200 (sm_90)``; like the device's peak figures of :mod:`executor.floor`), the same task
arguments, baseline source and timing options (:func:`baseline_key`), and while it is younger than
the store's ``max_age_s``; an older one is stale, and the next candidate of the task times the
baseline again and replaces it. Files are written atomically; an unreadable one counts as absent.

Never twice at once (:meth:`BaselineTimings.claim`): the host's executors take a task's claim (an
exclusive ``flock`` on ``.claims/<device>/<key>.lock`` under the store: per device model, as the store
is, so that executors of GPUs of different models on one host never wait for a timing they could not
use) before they time its baseline and keep it until the timing is stored. Another replica that wants
the same baseline meanwhile (a fleet spills a task's candidates to a second replica, which prepares
the task too) waits for the claim, then reads the stored timing instead of timing it again; if the
holder stored none (it failed, or died: the kernel lets a dead holder's lock go), the waiter times it
itself. A holder alive but stuck would keep every waiter (and their verdicts, which wait for the
baseline) forever: a waiter gives up after ``max_wait_s`` (the evaluator's ``run_timeout_s``) and times
it itself, unclaimed (logged). Too short a cap costs only a second timing, as before the claims.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from executor.cache import content_key
from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import TimingStats
from executor.worker.runner import candidate_process

logger = logging.getLogger(__name__)

# Raised when the way a baseline is timed changes, so that entries timed the old way are not reused.
TIMING_METHOD = "2026-11-29 host clock, rotated timing sets, own copies, own worker"
# Under the store: the claims on timing a baseline, one lock file per device model and baseline_key.
CLAIMS = ".claims"
# How often a waiter for another executor's claim tries it again (and looks at its ``stop``).
CLAIM_POLL_S = 0.05
# The source every stored timing names, and the only one read: a baseline worker (executor.baseline).
BASELINE_WORKER = "baseline_worker"
# The options a baseline's timing depends on (the rest concern the candidate: its checks, its limits).
TIMING_FIELDS = {
    "timing_inputs",
    "warmup",
    "warmup_ms",
    "min_trials",
    "max_trials",
    "min_timing_ms",
    "host_target_error",
    "max_timing_s",
    "rotate_buffers",
    "host_rotate_buffers",
    "repeat_pairs",
    "timing_sets",
    "launch_gate",
}


def baseline_key(
    task: FunctionTask | KernelTask, options: EvaluationOptions, over_cap: int | None = None
) -> str:
    """What a baseline timing depends on besides the device: the task's arguments and parameters, its
    ``naive.cu``, the timing options (:data:`TIMING_FIELDS`) and :data:`TIMING_METHOD`; and the host
    memory of its timed calls where it is not the default (``host_memory``: a page-locked baseline's
    copies run faster; the default's keys stay those stored before the option came). A page_locked
    key holds only a timing whose arrays were all locked (the evaluator keeps no other under it); its
    text changed with that rule, so that none stored before it (perhaps timed pageable) is read.
    ``over_cap`` (bytes; page_locked only): the key of a timing whose arrays were all left pageable
    because they passed that cap on locked bytes (the executor's ``host_lock_max_mb``), which a task's
    baseline does on every measurement under that cap (review 44 F3). A function task's baseline timed
    in a process of its own (the runner, where this executor runs function candidates there:
    :func:`executor.worker.runner.candidate_process`) has a key of its own, since its calls are timed
    through the runner's round trips and shared mappings (its medians ~4-14 % higher at the median task
    on an H200, session 37): executors of one cache with different settings never read each other's
    (review 38 L3); the in-worker keys stay those stored before."""
    where: tuple[str, ...] = ()
    if isinstance(task, FunctionTask) and candidate_process()[0]:
        where = ("timed in a process of its own",)
    if options.host_memory in (None, "pageable"):
        memory: tuple[str, ...] = ()
    elif over_cap is None:
        memory = (f"host_memory={options.host_memory}, every array locked",)
    else:
        memory = (
            f"host_memory={options.host_memory}, every array pageable past the cap of {over_cap} bytes",
        )
    return content_key(
        TIMING_METHOD,
        task.id,
        task.naive_source or "",
        task.model_dump_json(include={"params", "args"}),
        options.model_dump_json(include=TIMING_FIELDS),
        *memory,
        *where,
    )


def _device_dir(device: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", device)[:120] or "unknown"


class BaselineTimings:
    """The files of the baseline timings under ``directory``: ``<device>/<key>.json``, each holding the
    timing and when it was measured (wall clock)."""

    def __init__(self, directory: Path, max_age_s: float) -> None:
        self.directory = directory
        self.max_age_s = max_age_s

    def _path(self, device: str, key: str) -> Path:
        return self.directory / _device_dir(device) / f"{key}.json"

    def load(self, device: str, key: str, now: float | None = None) -> TimingStats | None:
        """The timing stored for ``device`` and ``key``; None when there is none, it cannot be read, it
        was not measured by a baseline worker (:data:`BASELINE_WORKER`), or it is stale (measured more
        than ``max_age_s`` ago, or in the future)."""
        found = self.load_aged(device, key, now)
        return None if found is None else found[0]

    def load_aged(self, device: str, key: str, now: float | None = None) -> tuple[TimingStats, float] | None:
        """As :meth:`load`, with the timing's age in seconds."""
        found = self.load_kept(device, key, now)
        return None if found is None else found[:2]

    def load_kept(
        self, device: str, key: str, now: float | None = None
    ) -> tuple[TimingStats, float, dict[str, float]] | None:
        """As :meth:`load_aged`, with the worker's ``seconds`` as stored (what its parts took, and what
        it says of its memory, such as ``host_lock_total_bytes``; the numbers only)."""
        path = self._path(device, key)
        try:
            entry = json.loads(path.read_text())
            measured_at = float(entry["measured_at"])
            stats = TimingStats.model_validate(entry["timing"])
            source = entry.get("source")
            stored = entry.get("seconds")
            seconds = {
                str(k): float(v)
                for k, v in (stored.items() if isinstance(stored, dict) else ())
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError) as e:
            logger.warning("ignoring the unreadable baseline timing %s: %s", path, e)
            return None
        if source != BASELINE_WORKER:
            logger.warning(
                "ignoring the baseline timing %s: measured by %s, not a baseline worker", path, source
            )
            return None
        age = (time.time() if now is None else now) - measured_at
        if not 0 <= age <= self.max_age_s:
            return None
        return stats, age, seconds

    def save(
        self,
        device: str,
        key: str,
        stats: TimingStats,
        now: float | None = None,
        seconds: dict[str, float] | None = None,
    ) -> None:
        """Store ``stats`` as measured now by a baseline worker (the only caller: executor.baseline's
        measurement), with how long the worker's parts took (``seconds``), atomically; a failure to
        write is logged, not raised: the timing is then only in the evaluator's memory."""
        path = self._path(device, key)
        entry = {
            "measured_at": time.time() if now is None else now,
            "device": device,
            "source": BASELINE_WORKER,
            "timing": stats.model_dump(mode="json"),
            "seconds": seconds or {},
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".baseline-", suffix=".tmp")
            try:
                with os.fdopen(handle, "w") as out:
                    json.dump(entry, out)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            logger.warning("could not store the baseline timing %s: %s", path, e)

    def claim_path(self, key: str, device: str) -> Path:
        """The lock file of the claim on timing the baseline ``key`` on ``device`` (its model)."""
        return self.directory / CLAIMS / _device_dir(device) / f"{key}.lock"

    @contextlib.contextmanager
    def claim(
        self,
        key: str,
        device: str,
        stop: threading.Event | None = None,
        max_wait_s: float | None = None,
    ) -> Iterator[float]:
        """Hold the host's claim on timing the baseline ``key`` on ``device`` for the block; yields how
        long it waited for another holder (0.0: nobody held it). Raises :class:`InterruptedError` once
        ``stop`` is set while it waits. After ``max_wait_s`` (None: no end) the block runs unclaimed,
        logged: a holder alive but stuck must not keep the baseline from being timed at all. When the
        claim's file cannot be made (a store that cannot be written), the block runs unclaimed
        (logged): the timing would then not be stored for the others either."""
        path = self.claim_path(key, device)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "ab")  # noqa: SIM115 (held across the yield)
        except OSError as e:
            logger.warning("no claim on the baseline %s: %s", key, e)
            yield 0.0
            return
        started = time.perf_counter()
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not self._wait_for(handle, started, stop, max_wait_s):
                    waited = time.perf_counter() - started
                    logger.warning(
                        "the baseline %s on %s: another executor held its claim for %.0f s without "
                        "storing a timing; timed here, unclaimed",
                        key,
                        device,
                        waited,
                    )
                    yield waited
                    return
                try:
                    yield time.perf_counter() - started
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
                return
            try:
                yield 0.0  # nobody held it: no wait, whatever the clock read meanwhile
            finally:
                # unlocked before closing: a process forked meanwhile holds a copy of the open file
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            handle.close()

    @staticmethod
    def _wait_for(
        handle: BinaryIO, started: float, stop: threading.Event | None, max_wait_s: float | None
    ) -> bool:
        """Wait until ``handle``'s claim is had (True) or ``max_wait_s`` from ``started`` passed (False);
        raise :class:`InterruptedError` once ``stop`` is set."""
        while True:
            left = math.inf if max_wait_s is None else started + max_wait_s - time.perf_counter()
            if left <= 0:
                return False
            pause = min(CLAIM_POLL_S, left)
            if stop is not None and stop.wait(pause):
                raise InterruptedError("stopped waiting for another executor's baseline") from None
            if stop is None:
                time.sleep(pause)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                continue
