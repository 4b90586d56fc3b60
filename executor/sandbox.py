"""Worker processes: started ahead of their jobs, isolated, watched, and always cleaned up.

Whatever the candidate does (segfault, abort, infinite loop, runaway allocation, sticky CUDA error),
the worker process takes the hit; this module turns its fate into a :class:`WorkerOutcome` and the
service keeps serving.

A :class:`WorkerPool` keeps one started *spare* per role (``candidate``, ``reference``): a process that
has already imported numpy and the executor and, for a GPU candidate worker, made its CUDA context and
L2-flush buffer, and now waits for a job on its stdin. Taking a spare saves that start-up on the
critical path; each job still gets a process of its own, used once. A finished worker is killed at
once, and a :class:`Reaper` waits for its teardown and removes its directory in the background.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import fcntl
import functools
import glob
import importlib.util
import logging
import math
import os
import platform
import pwd
import py_compile
import queue
import secrets
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from pydantic import BaseModel

from executor import timingset
from executor.cache import DEFAULT_CACHE_DIR
from executor.cgroup import HEADROOM_BYTES, CgroupError, CgroupMemory, CgroupPlace, WorkerCgroup, enter
from executor.clockcheck import CLOCK_CONFIRM_CALLS, clock_check, copy_allowance
from executor.errors import EvaluationCancelled, WorkerError
from executor.fleet.pinning import TIMING_SPLIT_ENV, executor_split
from executor.gpulock import LOCK_ENV, device_lock, host_memory_blocked, lock_files, pool_lock
from executor.jail import (
    DEVICES,
    HOST_PATHS,
    JAIL_UID,
    Jail,
    Protection,
    child_setup,
    gpu_paths,
    is_root,
    protection,
    python_paths,
    wide,
)
from executor.reach import (
    CACHE,
    ReachError,
    Unreachable,
    blockers,
    interpreter_needs,
    refusal,
    split_skippable,
    unreachable,
    x_only,
)
from executor.verdict import ErrorKind
from executor.worker.host import measure_host_gbps
from executor.worker.messages import (
    CLOCK_CONFIRM_CALL,
    DONE_FD_ENV,
    GPU_RELEASED,
    PREPARED,
    REPEAT_CONFIRM_CALLS,
    TIMED_CALL,
    CallBeat,
    CandidateRun,
    ReferenceJob,
    ReferenceOutcome,
    WorkerJob,
    WorkerOutcome,
    read_beat,
)
from executor.worker.runner import CANDIDATE_PROCESS_ENV, candidate_process, switch_on

logger = logging.getLogger(__name__)
T = TypeVar("T")

# A waiting parent sleeps until its worker writes to its "done" pipe (its result is there) or the
# pipe closes (it died), and wakes at least this often to enforce the deadline, read the worker's
# resident memory (/proc/PID/status) when it watches it, and look for its result and its exit. (It
# used to look every 2 ms, which added half of that to every verdict on average.)
POLL_S = 0.05
# A worker that released its GPU turn (GPU_RELEASED) must be done this long after the release: twice the
# time from its hand-over to the release, plus what its host checks must read at a conservative rate
# (the caller's ``checks_s``: executor.evaluate.post_release_checks_s), at least POST_RELEASE_MIN_S and
# at most POST_RELEASE_MAX_S (review 24a: a worker that lives on after its release keeps the device's
# locks from the next run); plus the time during which those checks could not begin, the host memory's
# lock held alone or waited for by another run (another GPU's copy-bound trials: up to their time cap
# and more; session 26's two H200s killed an honest game_of_life_u8 that waited so, 2.45 s after its
# release against an allowance of 2.4 s), itself at most POST_RELEASE_MAX_S.
POST_RELEASE_MIN_S = 2.0
POST_RELEASE_MAX_S = 30.0
# What the parent reads of a worker's done pipe at once, at most: chunks of BEAT_BYTES (a line of the
# worker's is far shorter).
BEAT_READS = 16
BEAT_BYTES = 4096
# The done channel is a pair of Unix seqpacket sockets where the kernel stamps each record the worker
# writes with the time of its write (SO_TIMESTAMPNS on the parent's end; its control message,
# SCM_TIMESTAMPNS, has the same number: Linux's generic 35, which x86-64 and arm64 use, and Python 3.11
# names neither): a struct timespec of two 64-bit fields on CLOCK_REALTIME. The executor's clock check
# (executor.clockcheck) takes a timed call's window between those stamps, not between when this process
# read the lines: its reading thread, late by a switch interval of the interpreter's lock or a
# scheduler's slice on a loaded host, read the start and the end of a call at once (a window of 0) or
# the end alone late (an honest 1.1 ms saxpy refused in session 32 with every window above 7.3 ms).
# Elsewhere (another machine, a kernel that refuses the option) the channel is a pipe, read-time stamped.
# A channel is taken only where a probe record (written once per process: _kernel_stamps) comes back with a stamp of that
# size (not under a kernel that takes the option and stamps nothing, say gVisor's, nor a 32-bit
# interpreter's, whose stamp is two 32-bit fields).
_SO_TIMESTAMPNS = 35
_STAMP = struct.Struct("qq")
_STAMPED_MACHINES = frozenset({"x86_64", "aarch64"})
# Linux's SO_PASSRIGHTS (6.16 on; generic 83): 0 on the parent's end refuses a worker's descriptors
# (SCM_RIGHTS) at its send, so that none sits in an unread record of the parent's queue, holding a file
# (a flocked lock file; on a GPU a /dev/nvidia* descriptor, so its context) after the worker is gone.
# Older kernels refuse the option: there the parent's end is closed as soon as the worker is stopped
# (WorkerProcess.wait, WorkerProcess.kill), which frees whatever its queue held.
_SO_PASSRIGHTS = 83
# What the parent reads of a stamped channel at once, at most: records (one line of the worker's each),
# and BEAT_READS x BEAT_BYTES bytes in all, as of a pipe (a worker that floods the channel with records
# of newlines held one read of 256 records for 0.9 s: review 34).
BEAT_RECORDS = 256
BEAT_BUDGET = BEAT_READS * BEAT_BYTES
# How many reads of the channel (each within the bounds above) the parent makes after the worker is
# stopped, for the lines it wrote before its result that were not read yet (its last timed call's end;
# an honest worker leaves a few lines; 4 x 64 KiB is about what the kernel queues for a socket at all).
FINAL_READS = 4
# The candidate worker's stages (see executor.worker.candidate) in which the candidate itself runs.
RUN_STAGES = frozenset({"correctness", "timing", "reference_timing", "baseline"})
# Every stage a worker reports (executor.worker: candidate, baseline, reference) and the waiter's
# defaults: a verdict names one of these, or UNKNOWN_STAGE (the progress file is the worker's to write,
# and code loaded in it, a candidate or an inline task's reference, may write anything there).
KNOWN_STAGES = frozenset(
    {
        "startup",
        "inputs",
        PREPARED,
        "correctness",
        "timing",
        "baseline",
        "reference",
        "timing_set_wait",
        "timing_set",
        "reference_timing",
    }
)
UNKNOWN_STAGE = "an unknown stage"
STDERR_TAIL = 4000
# The most read of a worker's progress file and of its result file (a result is kilobytes).
PROGRESS_MAX_BYTES = 64
RESULT_MAX_BYTES = 16 << 20
M = TypeVar("M", bound=BaseModel)

Role = Literal["candidate", "reference"]
Runtime = Literal["gpu", "host", "none"]


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (``T``, or ``t`` when traced): never an honest worker's state."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("T", "t")


# How many of a worker's descendants the memory watch reads, at most: its runner (which may not fork)
# and whatever a later change may start; the bound keeps a tick's cost whatever the tree becomes.
TREE_MAX = 32
_PROC_READ = 8192  # bytes: a status file is under 2 KB; a children file, 8 KB for about 1000 ids
_RSS_FIELDS = (b"RssAnon:", b"RssFile:", b"RssShmem:")


def _proc_read(path: str) -> bytes | None:
    """A /proc file's first :data:`_PROC_READ` bytes (with ``os.read``: ``Path.read_text`` costs
    about 25 us more per file, read 20 times a second per worker), None where it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, _PROC_READ)
    except OSError:
        return None
    finally:
        os.close(fd)


def _rss_parts(pid: int) -> list[int] | None:
    """A process's resident memory in bytes, from ``/proc/<pid>/status``: anonymous, file-backed and
    shared (``RssAnon``, ``RssFile``, ``RssShmem``; their sum is its ``VmRSS``); None once it is gone."""
    data = _proc_read(f"/proc/{pid}/status")
    if data is None:
        return None
    parts = [0, 0, 0]
    for index, field in enumerate(_RSS_FIELDS):
        at = data.find(field)
        if at >= 0:
            with contextlib.suppress(ValueError, IndexError):
                parts[index] = int(data[at + len(field) : data.find(b"\n", at)].split()[0]) * 1024
    return parts


def _children(pid: int) -> list[int]:
    """The direct children of a process: each of its threads' (a child is listed under the thread that
    started it, ``/proc/<pid>/task/<tid>/children``); none once it is gone."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        data = _proc_read(f"/proc/{pid}/task/{tid}/children")
        if data:
            ids = data.split()
            if len(data) == _PROC_READ:
                ids = ids[:-1]  # perhaps cut short
            found += [int(child) for child in ids if child.isdigit()]
    return found


def _tree_rss_bytes(pid: int) -> int:
    """The resident memory of a worker and its descendants (a function candidate's runner is its child,
    :mod:`executor.worker.runner`), up to :data:`TREE_MAX` of them: the worker's ``VmRSS``, plus each
    descendant's anonymous memory, plus what of a descendant's shared memory passes the worker's.

    Not the sum of their ``VmRSS``: a runner maps the input sets that the worker filled (a ``memfd``,
    resident in both) and the same libraries, which would count twice. A descendant's file-backed
    pages (those libraries; clean, reclaimable) are left out, and shared memory counts as the most
    that one process of the tree has resident (exact where the runner's is the worker's sets, a
    lower bound otherwise). 0 once the worker is gone."""
    worker = _rss_parts(pid)
    if worker is None:
        return 0
    anon, files, shared = worker
    pending = _children(pid)
    seen = 0
    while pending and seen < TREE_MAX:
        child = pending.pop()
        seen += 1
        parts = _rss_parts(child)
        if parts is None:
            continue
        anon += parts[0]
        shared = max(shared, parts[2])
        pending += _children(child)
    return anon + files + shared


@dataclass
class OpenCall:
    """A candidate call that the worker announced and has not ended (see :class:`CallWatch
    <executor.worker.runtime.CallWatch>`): when the parent read its start, its limit, how many calls
    or launches it is, and what it is."""

    started: float
    limit_s: float
    calls: int
    per_call_ms: float
    what: str

    @property
    def deadline(self) -> float:
        """When the worker is killed unless the call has ended."""
        return self.started + self.limit_s


def _worker_pythonpath() -> str:
    """A worker's ``PYTHONPATH``: the executor's checkout, then this process's."""
    return os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")])
    )


def _worker_env(gpu_lock: Path | None = None, timing_cores: int | None = None) -> dict[str, str]:
    """A worker's environment: this process's, with its GPU lock, the executor on its import path and
    the split of :func:`executor_split` for ``timing_cores`` (the executor's setting; None: as
    ``REGRAPH_EXECUTOR_TIMING_CORES`` says, else automatic)."""
    env = dict(os.environ)
    env.pop(LOCK_ENV, None)
    if gpu_lock is not None:
        env[LOCK_ENV] = str(gpu_lock)
    env["PYTHONPATH"] = _worker_pythonpath()
    # Where its function candidate runs, as chosen here (never ``auto``: the worker does not probe, and
    # the checks of its outcome here must know; executor.worker.runner.candidate_process).
    env[CANDIDATE_PROCESS_ENV] = "1" if candidate_process()[0] else "0"
    env.pop(TIMING_SPLIT_ENV, None)
    split = executor_split(timing_cores)  # the worker's trials' cores and the rest
    if split is not None:
        env[TIMING_SPLIT_ENV] = split.encode()
    return env


# --- The runtime jail of the workers --------------------------------------------------------------
#
# A candidate worker loads the candidate's code into its own process, so what that code can reach is
# what the worker can; a reference worker loads the task's reference, which is a caller's code too
# (an inline task of an evaluation or an optimisation, an imported graph). Under ``namespace`` each
# runs in the compile jail's machinery (executor.jail): new mount and PID namespaces whose root holds
# read-only binds of the interpreter, the executor package, the libraries (the CUDA driver's on a
# GPU), the executor's cache directories that a job names, the directory of the workers (the
# reference's outputs) and, for a candidate worker, the GPU lock files (opened read-only for their
# flocks), a writable bind of its own directory only (removed with the worker), a /dev/shm and a /tmp
# of its own, and an IPC namespace of its own (SysV objects and POSIX message queues die with the
# worker: review 25 kept answers in a SysV segment across evaluations); as uid 65534 with no new
# privileges and a parent-death signal. Its stdin, stderr file and done pipe are inherited as before. No worker writes
# the store of timing sets: a reference worker leaves the sets it makes in its own directory and the
# executor adopts them (executor.timingset.adopt) when it reads the worker's result.

# Set to 0/false/off to run the workers outside the jail (for debugging).
JAIL_WORKERS_ENV = "REGRAPH_EXECUTOR_JAIL_WORKERS"
# More read-only paths for the jail (os.pathsep-separated); each must exist, or the jail fails and the
# workers fall back (see worker_protection).
JAIL_EXTRA_ENV = "REGRAPH_EXECUTOR_JAIL_EXTRA_BINDS"
PROBE_TIMEOUT_S = 120.0
# What a jailed worker's environment keeps of the executor's (names, or prefixes ending in ``_``).
_ENV_KEPT = (
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "VIRTUAL_ENV",
    "LANG",
    "TZ",
    "LC_",
    "CUDA_",
    "NVIDIA_",
    "PYCUDA_",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    LOCK_ENV,
    DONE_FD_ENV,
    "REGRAPH_EXECUTOR_RUNNER_LANDLOCK",  # an operator's switch (executor.worker.runner.LANDLOCK_ENV)
    "REGRAPH_EXECUTOR_RUNNER_SEAL",  # another (executor.worker.runner.SEAL_ENV)
    CANDIDATE_PROCESS_ENV,  # ... and where a function candidate runs (set by _worker_env)
    TIMING_SPLIT_ENV,  # the workers' cores, set by _worker_env (executor.fleet.pinning)
)
_PACKAGE = Path(__file__).resolve().parent


def jail_workers_enabled() -> bool:
    """Whether the workers (candidate and reference) are jailed (:data:`JAIL_WORKERS_ENV`, on unless set to 0/false/off/no)."""
    return switch_on(JAIL_WORKERS_ENV)


def describe_worker(kind: Protection, role: Role = "candidate") -> str:
    """One line for a worker's log on what keeps the code it runs (a candidate's, or a task's
    reference: ``role``) from the host's files."""
    return {
        "namespace": f"{role} ran in a mount/PID-namespace jail as uid {JAIL_UID if is_root() else 'self'} "
        "(interpreter, libraries, the job's files and its own directory only)",
        "uid": f"{role} ran as a uid of its own (group {JAIL_UID}) without namespaces (files only root "
        "can read protected)",
        "none": f"{role} ran without a runtime jail (the executor's own user and file view)",
    }[kind]


_base_lock = threading.Lock()
_base: Path | None = None


def workers_dir() -> Path:
    """This process's directory of worker directories (0711: a jailed worker reaches its own and the
    reference's outputs by name, lists nothing)."""
    global _base
    with _base_lock:
        if _base is None or not _base.is_dir():
            _base = Path(tempfile.mkdtemp(prefix="regraph-workers-"))
            _base.chmod(0o711)
            atexit.register(shutil.rmtree, _base, True)
        return _base


# Directories that jobs named outside every worker's binds, and whether the worker writes there: bound
# in every later worker of the role (a job's cache directories, learned once per directory and role:
# what a reference worker writes, a candidate worker may only read).
_learned: dict[Role, dict[str, bool]] = {"candidate": {}, "reference": {}}
_learned_lock = threading.Lock()
_probed: dict[tuple[str, ...], Protection] = {}
# Why no protection is left for a key of _probed (as root), and when it may be probed again: None for a
# refusal of the reach check's alone (the host's directories: the same on every try), else
# REFUSAL_RETRY_S after it (a probe that failed may pass later: its 120 s under load, the GPU busy;
# review 41 L2: any refusal was kept for the process's life).
_refused: dict[tuple[str, ...], tuple[str, float | None]] = {}
REFUSAL_RETRY_S = 30.0
_probe_lock = threading.Lock()


def _open_to_jail(path: Path, writable: bool, owner: int = JAIL_UID) -> None:
    """Let the jail's uid reach ``path`` (a directory it is bound): through it, or own it to write
    (``owner``: a worker's own uid under the ``uid`` fallback, for its own directory; the group is the
    jail's, which every worker has)."""
    if not is_root():
        return
    with contextlib.suppress(OSError):
        if writable:
            os.chown(path, owner, JAIL_UID)
        elif path.is_dir():
            path.chmod(path.stat().st_mode | 0o001)


# Under the ``uid`` fallback (no namespaces) a worker sees the host's files as they are, so workers
# must not share a uid: one could then write another's directory (a reference worker's expected
# outputs decide a candidate's verdict), signal it or trace it. Each worker there runs as a uid of its
# own from this range (group: the jail's uid's), held by a lock file for as long as the worker lives,
# so that the executors of one host (a fleet's replicas) never hand one out twice. Uids that name a
# user of the host are skipped. (In the ``namespace`` jail every worker is uid 65534: each sees only
# its own directory writable, and no other process.)
WORKER_UIDS_ENV = "REGRAPH_EXECUTOR_WORKER_UIDS"
DEFAULT_WORKER_UIDS = "62000-62999"
_UID_LOCKS = Path(tempfile.gettempdir()) / "regraph-worker-uids"


def _worker_uid_range() -> range:
    low, _, high = os.environ.get(WORKER_UIDS_ENV, DEFAULT_WORKER_UIDS).partition("-")
    return range(int(low), int(high or low) + 1)


def take_worker_uid() -> tuple[int, Any]:
    """A uid that no other live worker of this host has, and the open lock file that holds it (closed
    when the worker is gone). Raises WorkerError when the range is used up."""
    _UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    held = _UID_LOCKS.lstat()
    if not stat.S_ISDIR(held.st_mode) or held.st_uid != os.geteuid() or held.st_mode & 0o022:
        raise WorkerError(f"{_UID_LOCKS} is not the executor's own directory: no worker uid handed out")
    for uid in _worker_uid_range():
        try:
            pwd.getpwuid(uid)
            continue  # a user of the host
        except KeyError:
            pass
        handle = (_UID_LOCKS / f"{uid}.lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return uid, handle
    raise WorkerError(f"no free worker uid in {os.environ.get(WORKER_UIDS_ENV, DEFAULT_WORKER_UIDS)}")


# The executor's cache directories whose files workers are handed (the reference's library, the timing
# sets, the candidates' products): every evaluator's (need_reach), the default one only where an
# evaluator uses it (review 41 L3: an executor given another cache was refused for the default's home).
# Under ``uid`` a worker opens them through the host's directories.
_reach_dirs: dict[Path, None] = {}
_reached: dict[tuple[Path, ...], list[Unreachable]] = {}


def need_reach(cache_dir: Path) -> None:
    """Add ``cache_dir`` to what :func:`worker_reach` checks (an evaluator's cache)."""
    with _probe_lock:
        _reach_dirs[Path(os.path.abspath(cache_dir))] = None


def worker_reach() -> list[Unreachable]:
    """What a worker of the ``uid`` protection (a uid of its own, group :data:`JAIL_UID`, no mount
    namespace) cannot reach of what it needs: the interpreter (executable) and its installation's
    import path, the executor's package and the entry that holds it, and the cache directories
    (:func:`need_reach`; passed through). Asked as a worker's uid, taken for the check
    (:func:`executor.reach.unreachable`: one ``/bin/sh``, a few ms), once per process and set of cache
    directories. The other entries of its ``PYTHONPATH`` are asked too, and one out of reach is logged,
    not returned: Python's import skips it (:func:`executor.reach.split_skippable`). Empty where the
    executor is not root (no other uid)."""
    if not is_root():
        return []
    dirs = tuple(_reach_dirs)
    if dirs not in _reached:
        needed = interpreter_needs(_PACKAGE, _worker_pythonpath().split(os.pathsep))
        needed += [(CACHE, d) for d in dirs]
        uid, held = take_worker_uid()
        try:
            problems = unreachable(needed, uid, JAIL_UID, x_only(needed))
        finally:
            held.close()
        _reached[dirs], skipped = split_skippable(problems)
        if skipped:
            logger.warning(
                "the workers (each a uid of its own: no namespaces here) cannot reach entries of their "
                "PYTHONPATH: %s. Python skips them; what a worker imports from them is missing, which its "
                "start-up probe says",
                blockers(skipped),
            )
    return _reached[dirs]


def require_worker_reach(cache_dir: Path) -> None:
    """At an evaluator's start, where its workers will run under ``uid`` (root, no namespaces): raise
    :class:`ReachError`, naming each path and the directory that blocks it and the ways out, when a
    worker could not reach what it needs (every candidate would crash at its worker's start)."""
    need_reach(cache_dir)
    with _probe_lock:
        problems = worker_reach()
    if problems:
        raise ReachError(refusal(problems, "the workers (each a uid of its own: no namespaces here)"))


# What a worker under the ``uid`` fallback (no IPC namespace) may leave behind in the host's IPC: SysV
# objects and POSIX shared memory and message queues, which outlive it and its memory limit (review 25:
# 1.5 GB of segments after a worker limited to 1 GB) and would keep answers for a later evaluation.
_SYSV = {"shm": "shmid", "sem": "semid", "msg": "msqid"}
_POSIX_IPC_DIRS = ("/dev/shm", "/dev/mqueue")  # noqa: S108 - the host's, where the fallback sees them
_IPC_RMID = 0


def remove_ipc_of(uid: int) -> int:
    """Remove every SysV shared-memory segment, semaphore set and message queue that ``uid`` owns or
    made, and every file it owns directly in :data:`_POSIX_IPC_DIRS` (POSIX shared memory and message
    queues); how many. For a worker of the ``uid`` fallback once it is gone (its uid is its alone)."""
    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    for kind, id_column in _SYSV.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split(), strict=False))
            if str(uid) not in (row.get("uid"), row.get("cuid")):
                continue
            ident = int(row[id_column])
            if kind == "shm":
                done = libc.shmctl(ident, _IPC_RMID, None)
            elif kind == "sem":
                done = libc.semctl(ident, 0, _IPC_RMID)
            else:
                done = libc.msgctl(ident, _IPC_RMID, None)
            removed += done == 0
    for directory in _POSIX_IPC_DIRS:
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid == uid and not entry.is_dir(
                        follow_symlinks=False
                    ):
                        os.unlink(entry.path)
                        removed += 1
    return removed


def _jail_can_read(path: Path) -> bool:
    """Whether the jail's uid can read ``path`` where its directory is bound: a library directory
    the executor has loaded from is bound as it is, and a private one (0700) keeps the jail out."""
    if not is_root():
        return True
    try:
        return bool(path.stat().st_mode & 0o004) and bool(path.parent.stat().st_mode & 0o001)
    except OSError:
        return False


def _add_mode(path: str, bits: int) -> None:
    """Add the permission ``bits`` to ``path``'s mode, only when some are missing: a chmod sets the
    file's change time even when it changes nothing, and a stored timing set's files are trusted
    without hashing only while they keep the identity (change time included) that the executor
    recorded when it published them (:func:`executor.timingset._published`)."""
    mode = os.stat(path).st_mode
    if mode & bits != bits:
        os.chmod(path, mode | bits)


def _open_timing_sets(spec_dir: str | None) -> None:
    """Let the jail's uid read a task's stored timing sets (``DIR`` and its variants ``DIR.N``): the
    reference worker stores them in private temporary directories renamed into place. Called on
    every job hand-over and admission: a set the executor published is already readable (0644 files
    in a 0755 directory) and is left untouched (review 31: chmodding it again on every hand-over gave
    its files a new change time, so every worker hashed them again, the checks made ahead of the
    trials were lost, and a worker hashing a file meanwhile refused the whole set)."""
    if not spec_dir or not is_root():
        return
    first = Path(spec_dir)
    with contextlib.suppress(OSError):
        for top in [first, *first.parent.glob(glob.escape(first.name) + ".*")]:
            for root, _, files in os.walk(top):
                _add_mode(root, 0o005)
                for name in files:
                    _add_mode(os.path.join(root, name), 0o004)


_secured: set[Path] = set()


def _secure_timing_store(spec_dir: str) -> None:
    """Make the store of timing sets that holds ``spec_dir`` the executor's alone (a reference worker
    once filled it as the jail's uid, which then owned it; under the ``uid`` fallback that uid could
    still write there), and the task's lock file, which its reference worker locks read-only."""
    root = Path(spec_dir).parent
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        if root not in _secured and is_root():
            _secured.add(root)
            me = os.geteuid()
            for top, dirs, files in os.walk(root):
                for name in [top, *(os.path.join(top, n) for n in (*dirs, *files))]:
                    with contextlib.suppress(OSError):
                        if os.lstat(name).st_uid == JAIL_UID:
                            os.lchown(name, me, me)
                            if not os.path.islink(name):
                                os.chmod(name, os.stat(name).st_mode & ~0o022)
            _open_to_jail(root, writable=False)
    with contextlib.suppress(OSError):
        timingset.make_lock(timingset.TimingSetSpec(dir=spec_dir, seed=0))


def _adopt_timing_sets(proc: WorkerProcess, outcome: ReferenceOutcome) -> None:
    """Store what a reference worker made for its task's store (its timing sets, the reference's
    timing): by the executor, under the key it computed from the task (the worker only reads the
    store)."""
    job = proc.reference_job
    if job is None or job.timing_set is None or not outcome.ok:
        return
    spec = job.timing_set
    try:
        for variant in timingset.variants(spec, job.options.timing_sets):
            timingset.adopt(variant, job.task, proc.dir)
        timing = outcome.reference_timing if job.time_reference else None
        if timing is not None and timingset.load_reference_timing(spec) is None:
            timingset.save_reference_timing(spec, timing)
    except (OSError, ValueError) as e:
        logger.warning("could not store the timing sets of %s: %s", job.task.id, e)


class _Spawner:
    """One thread, alive as long as this process, that starts every worker process.

    A worker's parent-death signal (SIGKILL, set between fork and exec) is sent when the *thread*
    that forked it ends, not the process (prctl(2)). Started by an evaluation's caller thread (a
    request's thread, which ends with its request) a spare, or a worker handed to another evaluation
    meanwhile, was killed under that evaluation: an honest candidate got ``crash`` "worker died from
    SIGKILL". Forked from this thread, a worker dies with the executor and only then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = -1

    def run(self, start: Callable[[], T]) -> T:
        """``start()`` called on the spawning thread; its result, or its exception raised here."""
        if threading.current_thread() is self._thread:
            return start()
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                # after a fork the thread is the parent's: a new one for this process
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._jobs,), name="regraph-worker-spawner", daemon=True
                )
                self._pid = os.getpid()
                self._thread.start()
            done: Future[T] = Future()
            self._jobs.put((start, done))
        return done.result()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            start, done = jobs.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(start())
            except BaseException as e:  # handed to the caller, which raises it
                done.set_exception(e)


_SPAWNER = _Spawner()


def _worker_setup(
    cwd: str, user: int | None, cores: tuple[int, ...] | None = None, cgroup_procs: int | None = None
) -> None:  # pragma: no cover - between fork and exec
    """A worker's files (the reference's outputs above all) readable by a jailed candidate worker; a
    worker of its own uid (the ``uid`` fallback) gets the jail's uid's group, which the directories
    that workers share are writable by. ``cores``: where it starts (the timing split's rest, so that
    not even its start-up runs on the cores kept for host-timed trials; the kernel may refuse).
    ``cgroup_procs``: a descriptor of its memory cgroup's ``cgroup.procs``, entered first, before the
    exec, so that nothing the worker starts (``unshare``, the jail's init, the worker, its runner) is
    ever outside it; a refusal fails the start."""
    if cgroup_procs is not None:
        enter(cgroup_procs)
    os.umask(0o022)
    if cores:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cores)
    if user is not None and user != JAIL_UID:
        os.chdir(cwd)  # entered while still privileged
        os.setgroups([])
        os.setgid(JAIL_UID)
        os.setuid(user)
        user = None  # child_setup does the rest (the parent-death signal, no new privileges)
    child_setup(None, cwd, user)


def _job_dirs(job: WorkerJob | ReferenceJob) -> list[tuple[Path, bool]]:
    """The directories that a worker's job reads (or writes: True) outside its own: a reference worker
    reads its library and the store of timing sets (the sets, its lock, the reference's timing).
    Each as the job names it, not resolved: the jail binds a path and, when links lead there, its real
    path too (`executor.jail.Jail`), and the job opens its files by the names it was given (a
    ``cache_dir`` reached through a link hid the reference library when only the real path was bound)."""
    dirs = [(Path(job.reference_library).parent, False)]
    if isinstance(job, ReferenceJob):
        if job.timing_set is not None:
            dirs.append((Path(job.timing_set.dir).parent, False))
    else:
        if job.expected_dir:
            dirs.append((Path(job.expected_dir).parent.parent, False))
        if job.timing_set is not None:
            dirs.append((Path(job.timing_set.dir).parent, False))
        if job.compare_product:
            dirs.append((Path(job.compare_product).parent, False))
    named = [(Path(os.path.abspath(d)), w) for d, w in dirs]
    return [(d, w) for d, w in named if not wide(d) and not wide(d.resolve())]


def write_worker_bytecode(package: Path) -> None:
    """Write the bytecode of ``package``'s modules into the ``__pycache__`` beside each source: where a
    jailed worker looks for it, since its environment has no ``PYTHONPYCACHEPREFIX`` (not kept) and it
    cannot write there. ``compileall`` writes under this process's prefix when one is set (``./dev test``
    sets one), so each jailed worker then compiled the executor's ~35 modules again at its start (~0.1
    of its ~0.5 CPU-s). A file already current is left as it is; one that cannot be written is skipped
    (its worker compiles it in memory)."""
    for source in sorted(package.rglob("*.py")):
        cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        with contextlib.suppress(OSError, py_compile.PyCompileError):
            if not _bytecode_current(source, cached):
                py_compile.compile(str(source), cfile=str(cached), doraise=True)


def _bytecode_current(source: Path, cached: Path) -> bool:
    """Whether ``cached`` is ``source``'s bytecode by the check the import system makes (the
    interpreter's magic number, the source's modification time and size)."""
    st = source.stat()
    expected = struct.pack(
        "<4sLLL", importlib.util.MAGIC_NUMBER, 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF
    )
    try:
        with cached.open("rb") as f:
            return f.read(16) == expected
    except OSError:
        return False


def worker_protection(runtime: Runtime, role: Role = "candidate") -> Protection:
    """The protection that workers of ``role`` and ``runtime`` start under: the compile jail's
    strongest (:func:`executor.jail.protection`) when a jailed worker passes its start-up probe
    (``python -m executor.worker probe``: imports, the CUDA context on a GPU, its directory, the lock
    files), else the next weaker that does, down to ``none``; each failure is logged. ``uid`` is tried
    only where its workers reach what they need (:func:`worker_reach`). Where the executor is root and
    every jail failed, raises :class:`WorkerError` with each failure rather than run a caller's code as
    root: ``none`` is had there only by turning the jail off (:data:`JAIL_WORKERS_ENV`). A refusal is
    kept: for good where only the reach check refused (the host's directories), for
    :data:`REFUSAL_RETRY_S` where a probe failed (then probed again). Probed once per role, runtime and
    setting (where it chose a protection)."""
    if not jail_workers_enabled():
        return "none"
    key = (role, runtime, os.environ.get(JAIL_EXTRA_ENV, ""), os.environ.get("REGRAPH_JAIL", ""))
    with _probe_lock:
        if key in _probed:
            return _probed[key]
        # A jailed worker cannot write the bytecode of modules only workers import: written here.
        write_worker_bytecode(_PACKAGE)
        strongest = protection()
        order: list[Protection] = ["namespace"] if strongest == "namespace" else []
        if is_root() and strongest != "none":
            order.append("uid")
        if key in _refused:
            message, again_at = _refused[key]
            if again_at is None or time.monotonic() < again_at:
                raise WorkerError(message)
            del _refused[key]
        chosen: Protection = "none"
        failures: list[str] = []
        probe_failed = False  # a refusal that may not stand: probed again after REFUSAL_RETRY_S
        for kind in order:
            problems = worker_reach() if kind == "uid" else []
            if problems:  # no probe: its worker could not even say what it lacks
                ok, out = False, refusal(problems, f"{role} workers of the uid protection")
            else:
                ok, out = _probe(role, runtime, kind)
                probe_failed = probe_failed or not ok
            if ok:
                chosen = kind
                break
            said = out.strip() if problems else out.strip()[-800:]
            failures.append(f"{kind}: {said}")
            logger.warning(
                "the runtime jail (%s) failed its start-up probe; trying a weaker one: %s", kind, said
            )
        if chosen == "none" and failures and is_root():
            # Never a fallback to the executor's own user, root: a caller's code (a candidate, an inline
            # task's reference) would run with every file of the host open to it. Refused, said why.
            again = f" (probed again from {REFUSAL_RETRY_S:.0f}s on)" if probe_failed else ""
            message = (
                f"no runtime jail works for {role} workers ({runtime} runtime) here, and without one "
                f"they would run as root: refused{again}. {' | '.join(failures)}"
            )
            _refused[key] = (message, time.monotonic() + REFUSAL_RETRY_S if probe_failed else None)
            logger.error("%s", message)
            raise WorkerError(message)
        level = logging.INFO if chosen == "namespace" else logging.WARNING
        logger.log(level, "%s workers (%s runtime): %s", role, runtime, describe_worker(chosen, role))
        _probed[key] = chosen
        return chosen


def _probe(role: Role, runtime: Runtime, kind: Protection) -> tuple[bool, str]:
    lock = device_lock() if runtime == "gpu" else None
    try:
        # No timing cores: a probe runs no trials, and an automatic split would take the host-wide claim
        # on them for this process's life, an unpinned replica's too (whose setting is 0; review 30 F2).
        proc = WorkerProcess(role, runtime, gpu_lock=lock, protection=kind, command="probe", timing_cores=0)
    except WorkerError as e:
        return False, str(e)
    try:
        try:
            proc.proc.wait(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False, f"the probe did not finish in {PROBE_TIMEOUT_S:.0f}s"
        out = proc.stderr_tail()
        return proc.proc.returncode == 0 and "probe ok" in out, out
    finally:
        proc.close()


class WorkerProcess:
    """One ``python -m executor.worker serve ROLE RUNTIME`` process with a private directory."""

    def __init__(
        self,
        role: Role,
        runtime: Runtime,
        workdir: Path | None = None,
        gpu_lock: Path | None = None,
        protection: Protection | None = None,
        command: Literal["serve", "probe", "peak", "baseline"] = "serve",
        binds: list[tuple[Path, bool]] | None = None,
        timing_cores: int | None = None,
        cgroups: CgroupPlace | None = None,
    ) -> None:
        """``timing_cores``: the executor's setting of that name, from which the worker's cores are
        split (:func:`executor.fleet.pinning.executor_split`; None: the environment's, else automatic).
        ``cgroups``: where the worker's memory cgroup is made (:mod:`executor.cgroup`; None: none)."""
        self.role = role
        self._cgroup_place = cgroups
        # The worker's memory cgroup (made at its start, kept across a restart before its job, removed
        # by close) and the memory limit its job was sent with.
        self.cgroup: WorkerCgroup | None = None
        self.memory_limit_bytes: int | None = None
        self.timing_cores = timing_cores
        self.runtime = runtime
        self.dir = Path(tempfile.mkdtemp(prefix=f"regraph-{role}-", dir=workdir or workers_dir()))
        self.stderr_path = self.dir / "stderr"
        self.result_path = self.dir / "result.json"
        self.progress_path = self.dir / "progress"
        self.gpu_lock = gpu_lock
        self._command = command
        # The runtime jail, for the reference too: an inline task's reference is a caller's code.
        self.protection: Protection = protection or worker_protection(runtime, role)
        if self.protection == "none" and cgroups is not None:
            # Its code runs as the executor's own uid, which may write the cgroup (review 40 H1): a limit
            # it could lift is no limit. The pool's place is kept for jailed workers.
            logger.warning("a %s worker without the jail runs without a memory cgroup", role)
            self._cgroup_place = None
        if role == "reference" and is_root():
            self.dir.chmod(0o711)  # its outputs reached by name by a jailed candidate worker
        self._timing_dir: str | None = None
        # The worker's own uid under the ``uid`` fallback (see take_worker_uid), and its lock.
        self.uid: int | None = None
        self._uid_lock: Any = None
        # A reference worker's job: what it made for the store is adopted from it (finish_reference).
        self.reference_job: ReferenceJob | None = None
        self.candidate_job: WorkerJob | None = None  # the candidate job sent (send_job)
        # The reference job's claim on its task's preparation (timingset.claim), held until adoption.
        self.claim: IO[bytes] | None = None
        self._jail_root: Path | None = None
        # Directories to bind besides the usual (and whether writable): a job's, known ahead.
        self._binds = list(binds or [])
        self.job_sent: float | None = None
        # How much the worker had written to its stderr when it was handed untrusted code (a
        # candidate): what comes after may be anything that code read, and never reaches a verdict.
        self.trusted_output: int | None = None
        self._trusted_tail = b""  # the end of that output, read at the hand-over
        self._done = -1
        self._done_sock: socket.socket | None = None
        # Held to close the done channel: the waiter and a thread that waits for the worker to be gone
        # (executor.evaluate's _let_go_when_gone) may both.
        self._done_lock = threading.Lock()
        # This process's descriptor of the worker's log (:meth:`_open_log`), and the lock that keeps
        # its reads from a close (and so from another file that took its number).
        self._log = -1
        self._log_lock = threading.Lock()
        self._spawn()

    def _jail(self) -> Jail:
        """What this worker may see in its jail."""
        read_only: list[str | Path] = [*HOST_PATHS, *python_paths(_PACKAGE), self.dir.parent]
        writable: list[str | Path] = []
        devices = list(DEVICES)
        if self.runtime == "gpu":
            paths, nodes = gpu_paths()
            read_only += paths
            devices += nodes
        cache = DEFAULT_CACHE_DIR.resolve()
        for sub in ("reference", "candidates", "timing-sets"):
            if (cache / sub).is_dir():
                read_only.append(cache / sub)
        with _learned_lock:
            known = _learned[self.role]
            for gone in [p for p in known if not os.path.exists(p)]:
                del known[gone]
            learned = dict(known)
        for bind, write in self._binds:
            if write:
                bind.mkdir(parents=True, exist_ok=True)
            learned[str(bind)] = learned.get(str(bind), False) or write
        for path, write in learned.items():
            _open_to_jail(Path(path), write)
            (writable if write else read_only).append(path)
        read_only = [p for p in read_only if not learned.get(str(p))]  # bound writable instead
        if self.gpu_lock is not None:
            # Read-only: the worker opens them read-only for its flocks (gpulock.open_lock); writable,
            # they were a store a candidate could keep answers in between evaluations (review 25).
            for f in lock_files(self.gpu_lock):
                f.touch(exist_ok=True)
                with contextlib.suppress(OSError):
                    f.chmod(0o644)
                read_only.append(f)
        extra = [p for p in os.environ.get(JAIL_EXTRA_ENV, "").split(os.pathsep) if p]
        env = {
            k: v
            for k, v in _worker_env(self.gpu_lock, self.timing_cores).items()
            if any(k == kept or (kept.endswith("_") and k.startswith(kept)) for kept in _ENV_KEPT)
        }
        return Jail(
            read_only=[*read_only, *(p for p in extra if os.path.exists(p))],
            writable=writable,
            devices=devices,
            env=env,
            tmpfs=("/dev/shm",),  # noqa: S108 - the jail's own, empty
            required=extra,
            init=True,
        )

    def _covers(self, path: Path, write: bool = False) -> bool:
        """Whether this worker's jail shows ``path`` (writable with ``write``; always true outside a
        namespace jail)."""
        if self.protection != "namespace":
            return True
        bound = [Path(str(p)) for p in (*(self._bound_rw if write else self._bound), self.dir)]
        return any(path == b or b in path.parents for b in bound)

    def _spawn(self) -> None:
        """Start (or start again) the worker process under :attr:`protection`."""
        sock, done_read, done_write = _done_channel()
        env = _worker_env(self.gpu_lock, self.timing_cores)
        env[DONE_FD_ENV] = str(done_write)
        # Whether its function candidate runs in a process of its own (its jail keeps the same value).
        self.own_process = env[CANDIDATE_PROCESS_ENV] == "1" and self.runtime != "none"
        argv = [sys.executable, "-m", "executor.worker", self._command, self.role, self.runtime]
        user: int | None = None
        self._bound: list[str | Path] = []
        self._bound_rw: list[str | Path] = []
        if self.protection != "none":
            jail = self._jail()
            jail.env[DONE_FD_ENV] = str(done_write)
            self._bound = [p for p in (*jail.read_only, *jail.writable) if os.path.exists(p)]
            self._bound_rw = [p for p in jail.writable if os.path.exists(p)]
            if self.protection == "namespace" and self._jail_root is None:
                self._jail_root = Path(tempfile.mkdtemp(prefix="regraph-jail-root-"))
            argv, env, user = jail.command(argv, self.dir, self._jail_root or self.dir, self.protection)
            if self.protection == "uid":
                env = dict(jail.env)  # the kept variables only, as in the namespace jail
                # A uid of its own has no account (no home to look up): its directory is its home.
                env.update(HOME=str(self.dir), TMPDIR=str(self.dir))
                if self.uid is None and is_root():
                    self.uid, self._uid_lock = take_worker_uid()
                user = self.uid if self.uid is not None else user
            _open_to_jail(self.dir, writable=True, owner=self.uid if self.uid is not None else JAIL_UID)
            _open_to_jail(self.dir.parent, writable=False)
        cgroup_procs: int | None = None
        try:
            err = self._open_log()
            # The first line of the worker's log: the protection in force (shown with a crash); for a
            # candidate worker that can run one, where a function candidate runs, and why, the second.
            os.write(err, f"[{describe_worker(self.protection, self.role)}]\n".encode())
            if self.role == "candidate" and self.runtime != "none":
                os.write(err, f"[{candidate_process()[1]}]\n".encode())
            # Its memory cgroup: a place that was checked at the start, so never run without it
            # (a CgroupError fails the start).
            if self._cgroup_place is not None and self.cgroup is None:
                self.cgroup = WorkerCgroup.make(self._cgroup_place)
            if self.cgroup is not None:
                cgroup_procs = self.cgroup.open_procs()
            split = executor_split(self.timing_cores)
            setup = functools.partial(
                _worker_setup, str(self.dir), user, split.rest if split else None, cgroup_procs
            )

            def start() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=err,
                    stderr=err,
                    cwd=self.dir,
                    env=env,
                    start_new_session=True,
                    pass_fds=(done_write,),
                    preexec_fn=setup,
                )

            # forked by a thread that lives as long as this process (_Spawner: the death signal)
            self.proc = _SPAWNER.run(start)
        except (
            OSError,
            subprocess.SubprocessError,
            CgroupError,
        ) as e:  # the second: its cgroup refused it
            if sock is not None:
                sock.close()
            else:
                os.close(done_read)
            self._remove_cgroup()
            self._close_log()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise WorkerError(f"cannot start a worker: {e}") from e
        finally:
            os.close(done_write)  # the worker holds the only write end: its exit closes the pipe
            if cgroup_procs is not None:
                os.close(cgroup_procs)
        self.started = time.monotonic()
        self._done_sock, self._done = sock, done_read
        self._stamped = sock is not None
        self._beats = b""  # the start of a line not yet read whole from the done pipe
        self._pid: int | None = None
        # The candidate call that runs now, and the one that ran past its limit (the kill's reason).
        self.open_call: OpenCall | None = None
        self.expired_call: OpenCall | None = None
        # The time between the worker's writes of the start and of the end of each timed call it
        # announced since it was handed its candidate, the difference of the kernel's two stamps
        # (seconds; None, unknown, when one has no stamp or the difference is not above 0: the host's
        # realtime clock set back in between; by the read times on a pipe), and the ends announced with
        # no call started (executor.clockcheck). ``read_windows``: the same calls by when this process
        # read the lines (what was compared before session 33; kept for
        # bench/probes/clock_slack_load.py, never compared). ``confirm_windows``: those of the
        # clock-confirming calls the worker made after the trials, the same way. ``stray_starts``: the
        # starts the worker's code did not write: one with a call still open (the worker never nests
        # its calls) or a timed call's after a clock-confirming call's (those come after the trials);
        # review 36c's M1 wrote a short clock-confirming call's start and end on the channel itself.
        self.timed_windows: list[float | None] = []
        self.read_windows: list[float] = []
        self.confirm_windows: list[float | None] = []
        self.unmatched_ends = 0
        self.stray_starts = 0
        self._confirming_seen = False
        self._timed_since: tuple[int | None, float, bool] | None = None
        # When the worker said that its candidate's GPU work is over (GPU_RELEASED), since its hand-over.
        self.released_at: float | None = None
        # Why the worker was killed after it released its GPU turn (its own fault), or None.
        self.released_fault: str | None = None
        # Seconds added to the run limit for the evaluator's holds for other runs' released workers.
        self.credited_s = 0.0
        # The deadline after the release (its allowance, from the release on), and the seconds added
        # to it while the host memory's lock, which the worker's checks then wait for, was held alone
        # or waited for by another run.
        self.release_allowance_s = 0.0
        self.release_lock_credit_s = 0.0

    def _respawn(self) -> None:
        """Start the worker again (its jail now binds what the job needs); before its job only."""
        self.kill()
        self._close_done()
        self._spawn()

    @property
    def pid(self) -> int:
        """The worker's own process id: in a namespace jail, the child of the jail's init (itself the
        child of ``unshare``)."""
        if self.protection != "namespace":
            return self.proc.pid
        if self._pid is None:
            pid = self.proc.pid
            for _ in range(2):
                try:
                    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                except OSError:
                    return self.proc.pid
                if not children:
                    return self.proc.pid
                pid = int(children[0])
            self._pid = pid
        return self._pid

    @property
    def returncode(self) -> int | None:
        """The worker's exit status, negative for a signal (the jail's init reports a signal ``N`` as
        ``128 + N``)."""
        code = self.proc.returncode
        if self.protection == "namespace" and code is not None and 128 < code <= 128 + 64:
            return 128 - code
        return code

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def _send_line(self, text: str) -> None:
        # A worker that died during start-up cannot read; its exit is reported when it is waited for.
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(text.encode() + b"\n")
            self.proc.stdin.flush()

    def send(self, name: str, message: BaseModel) -> None:
        """Write ``message`` to a file in the worker's directory and hand the worker its path."""
        path = self.dir / name
        # Made anew, never written through a link: the directory is the worker's uid's (review 41 H1).
        with os.fdopen(_make_anew(path, os.O_WRONLY), "w") as f:
            f.write(message.model_dump_json())
        self._send_line(str(path))
        if self.job_sent is None:
            self.job_sent = time.monotonic()

    def send_job(self, job: BaseModel, memory_limit_bytes: int | None, **fields: Any) -> None:
        """Hand the worker its job, pointed at this worker's result and progress files and memory
        limit (and any other ``fields``). A jailed worker whose jail lacks a directory that the job
        names (or lacks it writable) is started again with it (learned for every later worker of its
        role)."""
        if isinstance(job, (WorkerJob, ReferenceJob)) and job.timing_set is not None:
            self._timing_dir = job.timing_set.dir
        if isinstance(job, WorkerJob) and self.protection != "none":
            _open_timing_sets(self._timing_dir)
        if isinstance(job, WorkerJob):  # its task and figures bound the clock-confirming call's copy
            self.candidate_job = job
        if isinstance(job, ReferenceJob):
            self.reference_job = job
            if self._timing_dir:
                _secure_timing_store(self._timing_dir)
        if isinstance(job, (WorkerJob, ReferenceJob)) and self.job_sent is None:
            missing = [(d, w) for d, w in _job_dirs(job) if not self._covers(d, w)]
            for d, w in missing:  # bound only if it exists when the worker starts
                with contextlib.suppress(OSError):
                    d.mkdir(parents=True, exist_ok=True)
                with _learned_lock:
                    known = _learned[self.role]
                    known[str(d)] = known.get(str(d), False) or w
            if missing:
                what = ", ".join(str(d) for d, _ in missing)
                logger.info("%s worker's jail: binding %s", self.role, what)
                self._respawn()
        paths = {"progress_path": str(self.progress_path), "result_path": str(self.result_path)}
        update = {"memory_limit_bytes": memory_limit_bytes, **paths, **fields}
        self.memory_limit_bytes = memory_limit_bytes
        if self.cgroup is not None and memory_limit_bytes is not None:
            # Before the job: nothing of a caller's (a reference, a candidate) has run in it yet.
            try:
                self.cgroup.limit(memory_limit_bytes + HEADROOM_BYTES)
            except CgroupError as e:
                raise WorkerError(f"cannot limit the worker's memory cgroup: {e}") from e
        self.send("job.json", job.model_copy(update=update))

    def cgroup_memory(self) -> CgroupMemory | None:
        """What the worker's memory cgroup recorded (:meth:`WorkerCgroup.memory`); None without one,
        or where it cannot be read (logged)."""
        if self.cgroup is None:
            return None
        try:
            return self.cgroup.memory()
        except CgroupError as e:
            logger.warning("cannot read the worker's memory cgroup: %s", e)
            return None

    def memory_exceeded(self) -> str | None:
        """How the worker's memory cgroup met its limit with nothing left to reclaim (its figures), or
        None when it did not (or it has none)."""
        memory = self.cgroup_memory()
        return memory.describe() if memory is not None and memory.exceeded else None

    def _remove_cgroup(self) -> None:
        """Kill what is left in the worker's memory cgroup and remove it."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None

    def admit(self, run: CandidateRun) -> CandidateRun:
        """``run`` with its products in reach of the worker: a product outside its jail's binds is
        linked (or copied) into the worker's directory, and its directory learned for later workers."""
        if self.protection != "none":  # stored by the reference meanwhile
            _open_timing_sets(self._timing_dir)
        update: dict[str, str] = {}
        for name in ("candidate_product", "baseline_product"):
            value = getattr(run, name)
            if not value:
                continue
            product = Path(value).resolve()
            if self._covers(product) and (self.protection != "namespace" or _jail_can_read(product)):
                if str(product) != value:  # reached through a link, which the jail need not show
                    update[name] = str(product)
                continue
            source = Path(value)
            target = self.dir / f"{name}{''.join(source.suffixes)}"
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
            with contextlib.suppress(OSError):
                target.chmod(0o644)
            update[name] = str(target)
            if not wide(source.parent.resolve()):
                with _learned_lock:
                    _learned[self.role].setdefault(str(source.parent.resolve()), False)
        return run.model_copy(update=update) if update else run

    def stop(self) -> None:
        """Send SIGKILL to the worker's whole process group (anything the candidate forked goes too),
        without waiting for the processes to be gone."""
        if self.protection == "namespace" and self.alive:
            _ = self.pid  # known from now on: kill() waits for it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()

    def kill(self, timeout_s: float | None = None) -> bool:
        """Kill the worker's whole process group and wait for the worker to be gone (in a namespace
        jail, the worker itself, not only ``unshare``: its locks and its CUDA context go with it). With
        ``timeout_s``, wait that long at most; False when the process was still there then."""
        self.stop()
        # Whatever the worker left in the channel's queue (descriptors too, where the kernel takes them)
        # goes with the parent's end, before the worker is reported gone.
        self._close_done()
        started = time.monotonic()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        if self._pid is not None:
            left = 30.0 if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))
            return _wait_gone(self._pid, left)
        return True

    def close(self) -> None:
        """Kill the worker if it still runs and remove its directory and its memory cgroup (with
        anything left in it: a process that left the worker's process group)."""
        self.kill()
        self._close_done()
        self._remove_cgroup()
        self._close_log()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._jail_root is not None:
            with contextlib.suppress(OSError):
                self._jail_root.rmdir()
        timingset.release(self.claim)  # a job that never reached its adoption (cancelled, failed)
        self.claim = None
        if self.uid is not None and self.protection == "uid":  # no IPC namespace died with it
            left = remove_ipc_of(self.uid)
            if left:
                logger.info("removed %d IPC objects left by the worker of uid %d", left, self.uid)
        if self._uid_lock is not None:  # the worker is gone: its uid may be handed out again
            with contextlib.suppress(OSError, ValueError):  # not left to a forked copy of the file
                fcntl.flock(self._uid_lock, fcntl.LOCK_UN)
            self._uid_lock.close()
            self._uid_lock = None

    def wait(
        self,
        timeout_s: float,
        memory_limit_bytes: int | None,
        watch_rss: bool,
        run_limit_s: float | None = None,
        cancelled: threading.Event | None = None,
        on_release: Callable[[float], bool] | None = None,
        held_for_released: Callable[[], float] | None = None,
        checks_s: float = 0.0,
    ) -> ErrorKind | None:
        """Wait for the worker's result; kill it at the deadline or above the memory limit.

        The worker is killed as soon as its result file is there (written by an atomic rename):
        letting it tear down a CUDA context and gigabytes of arrays would only delay the next job.
        The kill is sent, not waited for: the kernel's teardown of the process (its memory, its CUDA
        context) is left to :meth:`close`, which a :class:`Reaper` runs off the critical path.
        With ``run_limit_s``, the worker is also killed that long after it reports that it runs the
        candidate (its first stage in :data:`RUN_STAGES`): the inputs it was still preparing when the
        job came do not count against the candidate.
        A candidate call that the worker announces on the done pipe (with its limit; see
        :class:`executor.worker.runtime.CallWatch`) kills it when it runs past that limit, counted
        from when the parent read the announcement; then :attr:`expired_call` names the call. An
        announcement can only bring the kill nearer: the deadlines above still apply.
        Returns :attr:`ErrorKind.TIMEOUT` / :attr:`ErrorKind.OUT_OF_MEMORY` when it had to be killed.
        Raises :class:`EvaluationCancelled`, the worker killed, once ``cancelled`` is set (the caller
        of the evaluation went away).
        ``on_release`` is called, in this thread, when the worker says that its candidate's GPU work is
        over (:data:`GPU_RELEASED`) and has no result yet, with how long it may take (one
        :data:`POLL_S` tick at most, instead of that tick's sleep), and again at each tick until it
        returns True (done), so that the checks of the kill, the stop, the deadlines and the memory
        run between its tries as always; the wait and its deadlines go on, and
        a deadline after the release comes in (twice the time from the wait's start to the release,
        plus ``checks_s``, what the worker's host checks must read at a conservative rate, within
        :data:`POST_RELEASE_MIN_S` and :data:`POST_RELEASE_MAX_S`), moved on by the time during which
        the host memory's lock could not be had shared (:func:`executor.gpulock.host_memory_blocked`:
        the checks wait for it; :attr:`release_lock_credit_s`, at most :data:`POST_RELEASE_MAX_S`):
        past it, the worker is killed for :attr:`ErrorKind.TIMEOUT` with :attr:`released_fault` saying
        why.
        A worker seen stopped (``/proc/<pid>/stat`` says ``T``: a candidate's SIGSTOP, say) is killed at
        once for :attr:`ErrorKind.CRASH`, :attr:`released_fault` saying so.
        ``held_for_released`` (the evaluator's count of seconds during which it held the device's locks
        for a released worker) moves the run limit's end on by what it grew since the run began
        (:attr:`credited_s`): this run's trials wait for those locks, no fault of this candidate.
        """
        began = time.monotonic()
        overall = deadline = began + timeout_s
        running = run_limit_s is None
        run_end: float | None = None  # when the run limit ends, before the credit below
        credit_base = 0.0
        released_end: float | None = None
        released = False
        killed_for: ErrorKind | None = None
        self.released_fault = None
        self.credited_s = 0.0
        self.release_lock_credit_s = 0.0
        self.release_allowance_s = 0.0
        looked = 0.0  # when the host memory's lock was last looked at after the release
        try:
            while self.proc.poll() is None and not self.has_result():
                self._stop_if(cancelled)
                if not running and self.stage_text() in RUN_STAGES:
                    running = True
                    run_end = time.monotonic() + (run_limit_s or 0.0)
                    credit_base = held_for_released() if held_for_released is not None else 0.0
                if run_end is not None and held_for_released is not None:
                    self.credited_s = held_for_released() - credit_base
                if not released and self.released_at is not None:
                    released = True
                    held = 2 * (self.released_at - began)
                    after = min(max(POST_RELEASE_MIN_S, held + checks_s), POST_RELEASE_MAX_S)
                    self.release_allowance_s = after
                    released_end = self.released_at + after
                    looked = self.released_at
                if released and released_end is not None:
                    # the checks' wait for the host memory's lock: no fault of the candidate
                    now = time.monotonic()
                    if self.release_lock_credit_s < POST_RELEASE_MAX_S and self._host_blocked():
                        credit = min(now - looked, POST_RELEASE_MAX_S - self.release_lock_credit_s)
                        self.release_lock_credit_s += credit
                        released_end += credit
                    looked = now
                deadline = min(
                    overall,
                    math.inf if run_end is None else run_end + self.credited_s,
                    math.inf if released_end is None else released_end,
                )
                self.released_fault = (
                    f"it ran longer than {released_end - self.released_at:.1f}s after its GPU turn was released"
                    if released_end is not None and self.released_at is not None and released_end <= deadline
                    else None
                )
                if _stopped(self.pid):
                    killed_for = ErrorKind.CRASH
                    self.released_fault = "it stopped itself" + (
                        " after its GPU turn was released" if released else ""
                    )
                    break
                left = self._deadline(deadline) - time.monotonic()
                if left <= 0:
                    self._read_beats()  # a call that has just ended is not killed for its limit
                    left = self._deadline(deadline) - time.monotonic()
                if left <= 0:
                    killed_for = ErrorKind.TIMEOUT
                    if not released or time.monotonic() < deadline:
                        self.released_fault = None  # not the deadline after the release
                    call = self.open_call
                    self.expired_call = call if call is not None and call.deadline < deadline else None
                    break
                if (
                    memory_limit_bytes is not None
                    and watch_rss
                    and _tree_rss_bytes(self.pid) > memory_limit_bytes
                ):
                    killed_for = ErrorKind.OUT_OF_MEMORY
                    break
                if on_release is not None and self.released_at is not None and not self.has_result():
                    # instead of this tick's sleep: the evaluator's tries for the device's locks, for
                    # one tick at most, the watch above between two (review 33 F8)
                    if on_release(min(left, POLL_S)):
                        on_release = None
                else:
                    self._sleep_until_done(min(left, POLL_S))
        finally:
            # On a kill, an interruption (service shutdown) or a normal exit alike: nothing keeps running.
            # What the worker wrote before it was stopped is read (its result is written after its last
            # call's end, so the loop can end before that end is read: the clock check wants every
            # window), and the channel closed with whatever else its queue held.
            self.stop()
            try:
                for _ in range(FINAL_READS):
                    if not self._read_beats():
                        break
            finally:
                self._close_done()
        return killed_for

    def _host_blocked(self) -> bool:
        """Whether the host memory's lock of this worker's pool could not be had shared now
        (:func:`executor.gpulock.host_memory_blocked`); False when its files cannot be opened."""
        if self.gpu_lock is None:
            return False
        try:
            return host_memory_blocked(self.gpu_lock)
        except OSError:
            return False

    def wait_prepared(self, timeout_s: float, cancelled: threading.Event | None = None) -> bool:
        """Wait until a candidate worker reports its preparation done (the stage :data:`PREPARED`),
        has written a result (its preparation failed) or is gone; False when ``timeout_s`` passed
        first. The evaluator waits here before it takes its GPU lock for the candidate, so that the
        lock is not held while the worker still generates or uploads inputs. Raises
        :class:`EvaluationCancelled` once ``cancelled`` is set."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and not self.has_result():
            self._stop_if(cancelled)
            if self.stage_text() == PREPARED:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._sleep_until_done(min(left, POLL_S))
        return True

    def _stop_if(self, cancelled: threading.Event | None) -> None:
        """Raise :class:`EvaluationCancelled` once ``cancelled`` is set (the evaluation's caller went
        away); the worker is then stopped by the waiter (:meth:`wait`) or discarded by the evaluator."""
        if cancelled is not None and cancelled.is_set():
            raise EvaluationCancelled(f"the {self.role} worker was stopped: its caller went away")

    def _deadline(self, deadline: float) -> float:
        """``deadline``, or the open call's deadline when that comes first."""
        call = self.open_call
        return deadline if call is None else min(deadline, call.deadline)

    def _sleep_until_done(self, timeout_s: float) -> None:
        """Sleep until the worker writes to its done pipe, the pipe closes or ``timeout_s`` passes;
        what it wrote is read (:meth:`_read_beats`)."""
        if self._done < 0:
            # The pipe closed: the worker has exited or is exiting. The kernel closes a dying process's
            # files before the process can be waited for, so the parent may get here in between (more
            # often on a loaded machine); it waits for the process itself, not for the clock.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout_s)
            return
        try:
            ready, _, _ = select.select([self._done], [], [], timeout_s)
        except (OSError, ValueError):
            self._close_done()
            return
        if ready:
            self._read_beats()

    def _receive(self) -> tuple[bytes, float, int | None] | None:
        """The next chunk of the done channel (a record of the socket, up to :data:`BEAT_BYTES` of the
        pipe): its bytes, when this process read it (monotonic) and the kernel's stamp of when the
        worker wrote it (CLOCK_REALTIME, ns; None on a pipe). None when there is nothing to read now
        or the channel closed (then closed here too)."""
        ancillary: list[tuple[int, int, bytes]] = []
        sock, fd = self._done_sock, self._done
        try:
            if sock is None:
                data = os.read(fd, BEAT_BYTES)
            else:
                data, ancillary, _, _ = sock.recvmsg(BEAT_BYTES, socket.CMSG_SPACE(_STAMP.size))
        except BlockingIOError:
            return None
        except (OSError, ValueError):
            self._close_done()
            return None
        now = time.monotonic()
        stamp = _stamp_ns(ancillary)
        if not data and stamp is None:  # closed: the worker is gone (an empty record has its stamp)
            self._close_done()
            return None
        return data, now, stamp

    def _read_beats(self) -> bool:
        """Read what the worker wrote on its done channel: the result's note, and the start and end of
        each candidate call, which set :attr:`open_call`. Closes the channel at its end. Reads at most
        :data:`BEAT_READS` chunks of a pipe, :data:`BEAT_RECORDS` records of a socket, and
        :data:`BEAT_BUDGET` bytes of either: a candidate that writes on the channel without end must
        not keep the parent from its deadlines. True when it stopped at those bounds (more may wait)."""
        budget = BEAT_BUDGET
        for _ in range(BEAT_READS if self._done_sock is None else BEAT_RECORDS):
            if self._done < 0:
                return False
            if budget < BEAT_BYTES:
                return True
            got = self._receive()
            if got is None:
                return False
            data, now, sent = got
            budget -= len(data)
            *lines, self._beats = (self._beats + data).split(b"\n")
            if len(self._beats) > BEAT_BYTES:  # no line of ours is that long
                self._beats = b""
            for line in lines:
                if line == GPU_RELEASED.rstrip(b"\n"):
                    self.released_at = self.released_at or now
                    continue
                beat = read_beat(line)
                if beat is None:
                    continue
                self._stamp(beat, sent, now)
                self.open_call = (
                    OpenCall(now, beat.limit_s, beat.calls, beat.per_call_ms, beat.what)
                    if beat.started
                    else None
                )
        return self._done >= 0

    def _stamp(self, beat: CallBeat, sent: int | None, read: float) -> None:
        """Keep the clocks around a timed call: the kernel's stamps of the worker's writes of its
        start's and its end's line (``sent``, ns) and when this process read them (``read``)."""
        if beat.started:
            confirming = beat.what.startswith(CLOCK_CONFIRM_CALL)
            timed = confirming or beat.what.startswith(TIMED_CALL)
            if self.open_call is not None or (timed and not confirming and self._confirming_seen):
                self.stray_starts += 1
            self._confirming_seen = self._confirming_seen or confirming
            self._timed_since = (sent, read, confirming) if timed else None
        elif self.open_call is None:
            self.unmatched_ends += 1
        elif self._timed_since is not None:
            began, began_read, confirming = self._timed_since
            window: float | None = read - began_read
            if self._stamped:  # the stamps' difference, on the kernel's clock, nothing converted
                ns = sent - began if sent is not None and began is not None else 0
                window = ns / 1e9 if ns > 0 else None
            if confirming:
                self.confirm_windows.append(window)
            else:
                self.timed_windows.append(window)
                self.read_windows.append(read - began_read)
            self._timed_since = None

    def _close_done(self) -> None:
        with self._done_lock:
            sock, fd = self._done_sock, self._done
            self._done_sock, self._done = None, -1
            if sock is not None:
                sock.close()
            elif fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _open_log(self) -> int:
        """Make the worker's log (its stdout and stderr) anew and keep this process's descriptor of it,
        which it reads with (:meth:`_log_tail`): the worker's uid owns the directory, so the name may
        later be another file's (review 41 H1: a link to a root-only file). Returns the descriptor."""
        self._close_log()
        fd = _make_anew(self.stderr_path, os.O_RDWR)  # anew too for a worker started again (before its job)
        with self._log_lock:
            self._log = fd
        return fd

    def _close_log(self) -> None:
        with self._log_lock:
            fd, self._log = self._log, -1
            if fd >= 0:
                os.close(fd)

    def _log_tail(self, end: int | None = None) -> tuple[int, bytes]:
        """The log's size and its last :data:`STDERR_TAIL` bytes (before ``end``, with one), read through
        this process's own descriptor of it (``(0, b"")`` once closed)."""
        with self._log_lock:
            if self._log < 0:
                return 0, b""
            size = os.fstat(self._log).st_size
            stop = size if end is None else min(end, size)
            start = max(0, stop - STDERR_TAIL)
            return size, os.pread(self._log, stop - start, start)

    def stage_text(self, default: str = "startup") -> str:
        """The last stage the worker reported: one of :data:`KNOWN_STAGES` (``default`` when it reported
        none), else :data:`UNKNOWN_STAGE`, which is also what a progress file that is not a plain file
        (a link, a FIFO) reads as."""
        try:
            text = read_worker_file(self.progress_path, PROGRESS_MAX_BYTES).decode("ascii")
        except FileNotFoundError:
            return default
        except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
            return UNKNOWN_STAGE
        text = text or default
        return text if text in KNOWN_STAGES else UNKNOWN_STAGE

    def has_result(self) -> bool:
        """Whether there is something under the result file's name (not followed if it is a link)."""
        return os.path.lexists(self.result_path)

    def read_result(self, model: type[M]) -> M | None:
        """The worker's result as ``model``; None when there is none, or when what is there is not a
        plain file (:func:`read_worker_file`: a link, a FIFO), logged. Raises pydantic's ValidationError
        for a plain file that does not hold one."""
        try:
            data = read_worker_file(self.result_path, RESULT_MAX_BYTES)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("the %s worker's result is not read: %s", self.role, e)
            return None
        return model.model_validate_json(data)

    def stderr_tail(self) -> str:
        """The end of the worker's stderr (for the executor's own use: it may hold what a candidate
        printed; :meth:`reported_tail` is what a verdict may show)."""
        try:
            return self._log_tail()[1].decode("utf-8", "replace")
        except OSError:
            return ""

    def hand_untrusted(self) -> None:
        """Note that the worker is about to load a candidate: its output from now on is the
        candidate's to choose (a host file it read, say) and is left out of :meth:`reported_tail`."""
        self.timed_windows, self.read_windows, self.unmatched_ends, self._timed_since = [], [], 0, None
        self.confirm_windows, self.stray_starts, self._confirming_seen = [], 0, False
        self.released_at = None
        # Its end read now: the candidate holds the file's descriptor (not opened to append) and owns
        # the directory, so it could later write over those bytes or put another file in their place.
        try:
            self.trusted_output, self._trusted_tail = self._log_tail()
        except OSError:
            self.trusted_output, self._trusted_tail = 0, b""

    def reported_tail(self) -> str:
        """The end of what the worker wrote before it was handed a candidate, and a note of how much
        it wrote after (that part stays in the worker's directory, removed with it)."""
        if self.trusted_output is None:
            return self.stderr_tail()
        own = self._trusted_tail.decode("utf-8", "replace")  # as it was at the hand-over
        try:  # the log itself, through this process's descriptor: never what its name now is
            after = self._log_tail()[0] - self.trusted_output
        except OSError:
            after = 0
        if after <= 0:
            return own
        return f"{own}\n[{after} bytes written after the candidate was loaded are not shown]".strip()


def _make_anew(path: Path, access: int) -> int:
    """A file in a worker's directory (which the worker's uid owns) made anew, never opened through what
    is there under its name (a link: review 41 H1), readable by the jailed uid whatever the executor's
    umask: its descriptor, opened for ``access`` (``os.O_WRONLY``, ``os.O_RDWR``)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, access | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.fchmod(fd, 0o644)
    except OSError:
        os.close(fd)
        raise
    return fd


def read_worker_file(path: Path, limit: int) -> bytes:
    """The content of ``path``, a file in a worker's directory (which the worker's uid owns, so that
    code loaded in the worker may have put anything in its place): opened without following a link and
    without blocking (a FIFO), read only when it is a plain file of one link (not a hard link to another
    file) of at most ``limit`` bytes. Raises FileNotFoundError when there is none, ValueError when it is
    not such a file, OSError when it cannot be opened (a link: ELOOP)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise ValueError(f"{path.name} is not a plain file")
        if st.st_size > limit:
            raise ValueError(f"{path.name} holds more than {limit} bytes")
        data = os.pread(fd, limit + 1, 0)
        if len(data) > limit:
            raise ValueError(f"{path.name} holds more than {limit} bytes")
        return data
    finally:
        os.close(fd)


def _done_channel() -> tuple[socket.socket | None, int, int]:
    """A worker's done channel: the parent's socket (None for a pipe), the parent's descriptor (to read,
    non-blocking) and the worker's (to write lines to). A pair of Unix seqpacket sockets whose parent end
    has the kernel stamp each record as it is written (:data:`_SO_TIMESTAMPNS`) and refuses descriptors
    where the kernel can (:data:`_SO_PASSRIGHTS`), where :func:`_kernel_stamps` found that the kernel
    stamps records; else a pipe."""
    if _kernel_stamps():
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError as e:
            logger.warning("no socket pair for a worker's done channel (a pipe instead): %s", e)
        else:
            try:
                _stamped_end(ours)
            except OSError as e:
                logger.warning("no kernel stamps on a worker's done channel (a pipe instead): %s", e)
                ours.close()
                theirs.close()
            else:
                return ours, ours.fileno(), theirs.detach()
    read, write = os.pipe()
    os.set_blocking(read, False)
    return None, read, write


def _stamped_end(ours: socket.socket) -> None:
    """Make ``ours`` the parent's end of a done channel: stamped by the kernel, refusing descriptors
    where the kernel can (Linux < 6.16 refuses the option: there the end is closed once the worker is
    stopped), non-blocking."""
    ours.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    with contextlib.suppress(OSError):
        ours.setsockopt(socket.SOL_SOCKET, _SO_PASSRIGHTS, 0)
    ours.setblocking(False)


@functools.cache
def _kernel_stamps() -> bool:
    """Whether this kernel stamps the records of a done channel with a stamp of :data:`_STAMP`'s size:
    a probe record written on a socket pair comes back with one (not under a kernel that takes the
    option and stamps nothing, say gVisor's, nor a 32-bit interpreter's). Asked once per process (the
    kernel's to answer, not a channel's), its refusal logged once."""
    if sys.platform != "linux" or platform.machine() not in _STAMPED_MACHINES:
        return False
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError as e:
        logger.warning("no socket pair for workers' done channels (pipes instead): %s", e)
        return False
    with ours, theirs:
        try:
            _stamped_end(ours)
            theirs.send(b"probe\n")
            _, ancillary, _, _ = ours.recvmsg(BEAT_BYTES, socket.CMSG_SPACE(_STAMP.size))
            if _stamp_ns(ancillary) is None:
                raise OSError("a probe record came back without the kernel's stamp")
        except OSError as e:
            logger.warning("no kernel stamps on workers' done channels (pipes instead): %s", e)
            return False
    return True


def _stamp_ns(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's stamp of when a record of the done channel was written (in ``ancillary``; ns of
    CLOCK_REALTIME, taken at the worker's write, which the worker cannot change: its own
    ``clock_gettime`` is its candidate's to rewrite, the kernel's is not; setting CLOCK_REALTIME takes
    CAP_SYS_TIME), or None without one of :data:`_STAMP`'s size. Descriptors a worker sent with its
    record (SCM_RIGHTS) are closed: the room for the stamp leaves the kernel none to install (and
    :data:`_SO_PASSRIGHTS` refuses them where it can), but none is kept either way."""
    stamp = None
    for level, kind, data in ancillary:
        if level != socket.SOL_SOCKET:
            continue
        if kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        elif kind == _SO_TIMESTAMPNS and len(data) == _STAMP.size and stamp is None:
            seconds, nanoseconds = _STAMP.unpack(data)
            stamp = int(seconds) * 1_000_000_000 + int(nanoseconds)
    return stamp


def _wait_gone(pid: int, timeout_s: float = 30.0) -> bool:
    """Wait until process ``pid`` has exited: gone, or a zombie whose other threads are gone too (its
    files, locks, memory and device context are released by then; a zombie leader whose threads
    still exit holds them). False when ``timeout_s`` passed first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            threads = len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            return True
        if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X") and threads <= 1:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


class Reaper:
    """Closes finished workers in a thread of its own: the wait for a killed process to be torn down
    (its memory and CUDA context, tens of milliseconds) and the removal of its directory (the expected
    outputs) are then not part of the verdict's time. :meth:`drain` waits for them, so the GPU work of
    the next candidate never overlaps a teardown."""

    def __init__(self) -> None:
        self._pending: list[WorkerProcess] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def discard(self, proc: WorkerProcess) -> None:
        """Kill ``proc`` now; wait for it and remove its directory in the background."""
        proc.stop()
        with self._cond:
            self._pending.append(proc)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="executor-reaper", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._pending:
                    self._thread = None
                    self._cond.notify_all()
                    return
                proc = self._pending[0]
            try:
                proc.close()
            except OSError as e:  # never leave the queue stuck on one process
                logger.warning("could not close worker %s: %s", proc.proc.pid, e)
            with self._cond:
                self._pending.pop(0)
                self._cond.notify_all()

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every discarded worker is closed; False if that took longer than ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


@dataclass
class PreparedEvaluation:
    """Workers that already hold a job for a given task and options, with seeds no candidate has seen:
    the reference worker computes the expected outputs, the candidate worker generates the inputs."""

    key: str
    seeds: list[int]
    reference: WorkerProcess
    candidate: WorkerProcess | None

    def close(self) -> None:
        """Stop both workers."""
        self.reference.close()
        if self.candidate is not None:
            self.candidate.close()

    def workers(self) -> list[WorkerProcess]:
        """The reference worker and, when there is one, the candidate worker."""
        return [self.reference] + ([self.candidate] if self.candidate is not None else [])


class WorkerPool:
    """Spare worker processes, one per role, started ahead of the jobs that will take them, and at
    most one :class:`PreparedEvaluation` for the next candidate of the task evaluated last."""

    def __init__(
        self,
        runtime: Runtime,
        prewarm: bool = True,
        workdir: Path | None = None,
        timing_cores: int | None = None,
        cgroups: CgroupPlace | None = None,
    ) -> None:
        """``timing_cores``: the executor's setting, handed to every worker (:class:`WorkerProcess`);
        ``cgroups``: where each worker's memory cgroup is made (None: no cgroups)."""
        self.runtime = runtime
        self.timing_cores = timing_cores
        self.cgroups = cgroups
        self.prewarm = prewarm
        self.workdir = workdir
        self._spares: dict[Role, WorkerProcess] = {}
        self._prepared: PreparedEvaluation | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.reaper = Reaper()
        # The lock file of this pool's GPU work (see executor.gpulock); candidate workers hold it. On a
        # GPU it is the device's, shared with every executor of the host that uses the device.
        self.gpu_lock, self._owns_lock = pool_lock(runtime, workdir)

    def discard(self, proc: WorkerProcess) -> None:
        """Kill a worker that is done with; it is waited for and cleaned up in the background."""
        self.reaper.discard(proc)

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait for the discarded workers to be gone (see :meth:`Reaper.drain`)."""
        return self.reaper.drain(timeout_s)

    def take_prepared(self, key: str) -> PreparedEvaluation | None:
        """The prepared evaluation for ``key`` (handed over once), or None; one for another key is
        stopped, since the next candidate is for a different task or options."""
        with self._lock:
            prepared, self._prepared = self._prepared, None
        if prepared is None:
            return None
        alive = prepared.reference.alive or prepared.reference.has_result()
        if prepared.key == key and alive and (prepared.candidate is None or prepared.candidate.alive):
            return prepared
        for proc in prepared.workers():
            self.discard(proc)
        return None

    def keep_prepared(self, prepared: PreparedEvaluation) -> None:
        """Hold ``prepared`` for the next evaluation (replacing and stopping any older one)."""
        stale: PreparedEvaluation | None
        with self._lock:
            if self._closed:
                stale = prepared
            else:
                stale, self._prepared = self._prepared, prepared
        if stale is not None:
            for proc in stale.workers():
                self.discard(proc)

    def _runtime_of(self, role: Role) -> Runtime:
        return self.runtime if role == "candidate" else "none"

    def _start(self, role: Role, command: Literal["serve", "peak", "baseline"] = "serve") -> WorkerProcess:
        lock = self.gpu_lock if role == "candidate" else None
        return WorkerProcess(
            role,
            self._runtime_of(role),
            self.workdir,
            gpu_lock=lock,
            command=command,
            timing_cores=self.timing_cores,
            cgroups=self.cgroups,
        )

    def start_command(self, command: Literal["peak", "baseline"]) -> WorkerProcess:
        """A new candidate worker that runs ``command`` once (the device peak's probe, a naive
        baseline's measurement), made as this pool's candidate workers are: its runtime, directory, GPU
        lock and timing cores."""
        return self._start("candidate", command)

    def take(self, role: Role) -> WorkerProcess:
        """A started worker for ``role``: the spare when there is a live one, else a new process."""
        with self._lock:
            spare = self._spares.pop(role, None)
        if spare is not None and not spare.alive:
            logger.warning("spare %s worker died while waiting: %s", role, spare.stderr_tail()[-500:])
            spare.close()
            spare = None
        return spare or self._start(role)

    def replenish(self, role: Role) -> None:
        """Start a spare for ``role`` if pre-warming is on and there is none."""
        if not self.prewarm:
            return
        with self._lock:
            if self._closed or role in self._spares:
                return
            try:
                self._spares[role] = self._start(role)
            except WorkerError as e:
                logger.warning("could not start a spare %s worker: %s", role, e)

    def close(self) -> None:
        """Stop the spares; later ``replenish`` calls do nothing."""
        with self._lock:
            self._closed = True
            spares, self._spares = list(self._spares.values()), {}
            prepared, self._prepared = self._prepared, None
        for spare in spares:
            spare.close()
        if prepared is not None:
            prepared.close()
        self.drain()
        for path in lock_files(self.gpu_lock) if self._owns_lock else []:
            path.unlink(missing_ok=True)


def _death_message(proc: WorkerProcess, stage_text: str) -> tuple[ErrorKind, str]:
    code = proc.returncode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        what = f"worker died from {name} during {stage_text}"
    else:
        what = f"worker exited with status {code} during {stage_text} without a result"
    tail = proc.stderr_tail()
    kind = ErrorKind.OUT_OF_MEMORY if "MemoryError" in tail or "std::bad_alloc" in tail else ErrorKind.CRASH
    logger.info("%s", what)
    return kind, f"{what}\n{proc.reported_tail().strip()[-1500:]}".strip()


def start_candidate(proc: WorkerProcess, job: WorkerJob, memory_limit_bytes: int | None) -> None:
    """Hand a candidate worker the candidate-independent part of its job (it starts generating inputs)."""
    proc.send_job(job, memory_limit_bytes)


def clock_confirm_seeds(count: int = CLOCK_CONFIRM_CALLS) -> list[int]:
    """``count`` distinct seeds of this process's entropy: by default, for a candidate worker's
    clock-confirming calls (:attr:`CandidateRun.clock_confirm_seeds`)."""
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbits(63)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


# The host copy rate measured again for the copy allowance (_copy_allowance): one measurement at a time
# (a 256-MB copy: 512 MB of this process's memory while it runs), and one made in the last few seconds
# is reused, so that many evaluations reaching that path at once (or candidates that write
# clock-confirming lines to reach it) cost one.
_RATE_LOCK = threading.Lock()
_rate_now: tuple[float, float] | None = None  # (time.monotonic() when measured, GB/s)
RATE_REUSE_S = 5.0


def _host_rate_now() -> float:
    """The host copy rate (:func:`executor.worker.host.measure_host_gbps`), measured here now or in the
    last :data:`RATE_REUSE_S` seconds."""
    global _rate_now
    with _RATE_LOCK:
        if _rate_now is None or time.monotonic() - _rate_now[0] > RATE_REUSE_S:
            _rate_now = (time.monotonic(), measure_host_gbps())
        return _rate_now[1]


def _copy_allowance(proc: WorkerProcess) -> tuple[float, str]:
    """The clock-confirming call's copy allowance for ``proc``'s candidate job (``(0.0, "")`` without one
    or without a confirming call): from the job's figures and, only where a confirming call was made,
    the host copy rate measured again here, now (a 256-MB copy in this process, which runs no
    candidate code; the higher rate is used: :func:`executor.clockcheck.copy_allowance`)."""
    job = proc.candidate_job
    if job is None or not proc.confirm_windows:
        return 0.0, ""
    allowance = copy_allowance(job.task, job.device_peak)
    if allowance[0] <= 0:
        return allowance
    return copy_allowance(job.task, job.device_peak, _host_rate_now())


def finish_candidate(
    proc: WorkerProcess,
    run: CandidateRun,
    timeout_s: float,
    memory_limit_bytes: int | None,
    run_limit_s: float | None = None,
    cancelled: threading.Event | None = None,
    on_release: Callable[[float], bool] | None = None,
    held_for_released: Callable[[], float] | None = None,
    checks_s: float = 0.0,
) -> WorkerOutcome:
    """Hand the worker its compiled candidate and wait for the outcome (crash and timeout included);
    ``run_limit_s`` limits the candidate's own run and ``run.call_limit`` each of its calls (see
    :meth:`WorkerProcess.wait`, which calls ``on_release`` when the worker's GPU work is over). The
    outcome's ``seconds["run"]`` is the time from the hand-over to the outcome, a killed or dead
    worker's too. ``timeout_s`` bounds the wait for the worker's preparation and the run together
    (review 41 L4: each had its own, twice ``timeout_s`` in all)."""
    # Handed over once the worker is prepared (or gone), as the evaluator waits for it: what the worker
    # wrote until then is its own, a start-up failure's cause included ("Permission denied" on the
    # reference's library), and is shown with a crash; handed over at once, its death was counted the
    # candidate's and its cause hidden as the candidate's output.
    began = time.monotonic()
    proc.wait_prepared(timeout_s, cancelled)
    start = time.monotonic()
    # What is left of the one deadline (none: the kill comes at once, "during inputs")
    left_s = max(0.0, timeout_s - (start - began))
    proc.hand_untrusted()
    # The clock-confirming calls' seeds come from here, not the worker's entropy, which its candidate
    # can change (review 36c's H1 made every confirming set the same and answered the last from a memo);
    # so do the repeat-visit rule's confirming sets' (distinct from theirs) and the spot samples' draws.
    seeds = clock_confirm_seeds(CLOCK_CONFIRM_CALLS + REPEAT_CONFIRM_CALLS)
    update = {
        "sent_at": start,
        "clock_confirm_seeds": seeds[REPEAT_CONFIRM_CALLS:],
        "repeat_confirm_seeds": seeds[:REPEAT_CONFIRM_CALLS],
        "spot_seed": secrets.randbits(128),
    }
    proc.send("run.json", proc.admit(run).model_copy(update=update))
    killed_for = proc.wait(
        left_s,
        memory_limit_bytes,
        watch_rss=proc.runtime == "gpu",
        run_limit_s=run_limit_s,
        cancelled=cancelled,
        on_release=on_release,
        held_for_released=held_for_released,
        checks_s=checks_s,
    )
    elapsed = time.monotonic() - start
    stage_text = proc.stage_text()
    stage: Literal["correctness", "timing"] = (
        "timing" if stage_text in ("timing", "baseline", "reference_timing") else "correctness"
    )
    exceeded = proc.memory_exceeded()
    if exceeded is not None:
        # Its memory cgroup met the limit: the kernel killed a process of it (the worker, or its runner,
        # whose death ends the worker), or refused it memory. Whatever the worker wrote or how it died.
        limit_bytes = memory_limit_bytes if memory_limit_bytes is not None else proc.memory_limit_bytes
        return WorkerOutcome(
            passed=False,
            stage=stage,
            error=ErrorKind.OUT_OF_MEMORY,
            message=f"worker exceeded {limit_bytes} bytes of host memory during {stage_text} (its memory "
            f"cgroup, which counts tmpfs files, memfd and shared memory too: {exceeded})",
            seconds={stage: elapsed, "run": elapsed},
        )
    if killed_for is not None and proc.released_fault is not None:  # the candidate's fault, named
        return WorkerOutcome(
            passed=False,
            stage=stage,
            error=killed_for,
            message=f"worker killed after {elapsed:.1f}s during {stage_text}: {proc.released_fault}",
            seconds={stage: elapsed, "run": elapsed},
            killed_by="run" if killed_for is ErrorKind.TIMEOUT else None,
        )
    if killed_for is ErrorKind.TIMEOUT:
        call = proc.expired_call
        if call is not None:
            limit = run.call_limit
            basis = f" ({limit.describe(call.calls, call.per_call_ms)})" if limit is not None else ""
            why = f": {call.what} ran longer than its call limit of {call.limit_s:.1f}s{basis}"
        elif run_limit_s is not None and run_limit_s < left_s:
            why = f" (run limit {run_limit_s:.1f}s)"
        else:
            why = ""
        return WorkerOutcome(
            passed=False,
            stage=stage,
            error=ErrorKind.TIMEOUT,
            message=f"killed after {elapsed:.1f}s during {stage_text}{why}",
            seconds={stage: elapsed, "run": elapsed},
            killed_by="call" if call is not None else "run",
        )
    if killed_for is ErrorKind.OUT_OF_MEMORY:
        return WorkerOutcome(
            passed=False,
            stage=stage,
            error=ErrorKind.OUT_OF_MEMORY,
            message=f"worker exceeded {memory_limit_bytes} bytes of host memory during {stage_text}",
            seconds={stage: elapsed, "run": elapsed},
        )
    outcome = proc.read_result(WorkerOutcome)
    if outcome is not None:
        announced = run.call_limit is not None  # the worker announces its calls (executor.worker.runtime)
        outcome = clock_check(
            outcome,
            proc.timed_windows,
            proc.unmatched_ends,
            announced,
            proc.confirm_windows,
            proc.stray_starts,
            # Function candidates in a runner: as this process told the worker at its start
            own_process=proc.own_process,
            # Reckoned here, from the job this process sent (the executor's measured figures), never
            # from what the worker reports (docs/executor.md, "The copy's cost").
            copy_allowance=_copy_allowance(proc),
        )
        return outcome.model_copy(update={"seconds": {**outcome.seconds, "run": elapsed}})
    kind, message = _death_message(proc, stage_text)
    seconds = {stage: elapsed, "run": elapsed}
    return WorkerOutcome(passed=False, stage=stage, error=kind, message=message, seconds=seconds)


def start_reference(
    proc: WorkerProcess, job: ReferenceJob, memory_limit_bytes: int | None, claim: bool = True
) -> None:
    """Hand a reference worker its job; it runs at once. A job that may have to prepare its task's
    timing sets claims that for the host first (timingset.claim, held until :func:`finish_reference`
    has adopted what the worker made); without the claim, the worker waits for the job that has it.
    With ``claim`` False (a job whose end nobody waits for: a prepared pair), the job never claims: its
    worker waits for a holder if there is one, else prepares what is missing itself."""
    spec = job.timing_set
    if spec is not None and not claim:
        job = job.model_copy(update={"may_prepare": False})
    elif spec is not None and not timingset.prepared(spec, job.options.timing_sets, job.time_reference):
        try:  # the lock file made here; the store secured by send_job, before the worker sees it
            proc.claim = timingset.claim(spec)
        except OSError as e:  # no lock: the worker prepares what is missing, as if it held the claim
            logger.warning("could not claim the preparation of %s: %s", job.task.id, e)
        else:
            job = job.model_copy(update={"may_prepare": proc.claim is not None})
    proc.send_job(job, memory_limit_bytes, out_dir=str(proc.dir / "expected"))


def finish_reference(
    proc: WorkerProcess, timeout_s: float, cancelled: threading.Event | None = None
) -> ReferenceOutcome:
    """Wait for a reference worker; a crash or timeout is the task's failure, reported as such
    (:class:`EvaluationCancelled` once ``cancelled`` is set)."""
    try:
        killed_for = proc.wait(timeout_s, None, watch_rss=False, cancelled=cancelled)
        exceeded = proc.memory_exceeded()
        if exceeded is not None:
            return ReferenceOutcome(
                ok=False,
                message=f"the reference's worker exceeded {proc.memory_limit_bytes} bytes of host memory "
                f"(its memory cgroup: {exceeded})",
            )
        if killed_for is ErrorKind.TIMEOUT:
            return ReferenceOutcome(ok=False, message=f"the reference was killed after {timeout_s:.0f}s")
        outcome = proc.read_result(ReferenceOutcome)
        if outcome is not None:
            _adopt_timing_sets(proc, outcome)
            _open_timing_sets(proc._timing_dir)  # for the jailed candidate workers that read it
            return outcome
        _, message = _death_message(proc, proc.stage_text("reference"))
        return ReferenceOutcome(ok=False, message="the reference's worker failed: " + message)
    finally:
        # Stored (or failed): a job waiting for this one's preparation goes on.
        timingset.release(proc.claim)
        proc.claim = None


def run_job(
    job: WorkerJob,
    run: CandidateRun,
    timeout_s: float,
    memory_limit_bytes: int | None = None,
    workdir: Path | None = None,
    run_limit_s: float | None = None,
    timing_cores: int | None = 0,
) -> WorkerOutcome:
    """Run one candidate job in a fresh worker process, start to finish, and return its outcome.
    ``timing_cores``: the executor's setting (:class:`WorkerProcess`); by default none, so that a one-off
    job takes no host-wide claim on timing cores (held for the process's life: review 30 F2)."""
    proc = WorkerProcess("candidate", job.runtime, workdir, binds=_job_dirs(job), timing_cores=timing_cores)
    try:
        start_candidate(proc, job, memory_limit_bytes)
        return finish_candidate(proc, run, timeout_s, memory_limit_bytes, run_limit_s)
    finally:
        proc.close()
