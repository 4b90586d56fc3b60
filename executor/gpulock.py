"""The executor's locks for the work of its worker processes: the GPU's, the uploads', the host memory's.

The evaluator serialises the candidates' runs, but a worker also works outside its run: a spare makes
its CUDA context and L2-flush buffer while it starts, and a prepared worker makes its timing buffers
while the candidate before it may still be timed. What must not overlap a candidate's trials holds a
lock *exclusively*; what the trials cannot see holds it *shared*, so that it overlaps other shared work
and the trials that tolerate it. Three resources are locked that way:

The GPU (``resource="gpu"``):

- exclusive: a function task's trials (its calls are timed on the host clock, copies included, so
  any other GPU or PCIe traffic lands in its samples);
- shared: the rest of the work on the GPU that is not uploads: a kernel task's run, a function task's
  correctness calls (untimed), a context's creation (made beside a function task's trials, it
  doubled their number on an H100: bench/results/2026-11-27_s13), and the evaluator's wait for
  finished workers' teardown.

The uploads (``resource="uploads"``), GPU memory traffic that event-timed launches see (another
process's 256 MB upload moved a memory-bound kernel's p90 by 1.5 %: bench/device/overlap_probe.py,
bench/results/2026-11-27_h200_s11/call2_overlap/):

- exclusive: a kernel task's trials (its launches are timed with CUDA events on its own stream; in the
  same probe, other processes' context creation, teardown and kernels left the medians and p90 within
  0.4 %, so nothing else is kept from them) and a function task's trials;
- shared: a kernel task's prepared uploads, which so overlap any candidate's untimed checks, context
  creation and each other.

The host memory (``resource="host"``):

- exclusive: a copy-bound function task's trials (its calls copy hundreds of MB from host memory),
  and those of a task whose copy rate is not known yet;
- shared: a compute-bound function task's trials (:func:`compute_bound`: its arrays at the timing size
  move under 2 GB/s over its naive baseline's median as kept, never a candidate's; their time is
  the GPU's, and host traffic beside them moved them by 1 % on two H200s), a function task's
  correctness calls, its prepared host copies of its timing set, and a kernel task's prepared
  uploads (copies out of host memory too). Made beside a function task's trials, the copies doubled its trials on the H200, so they wait for those; a kernel task's trials
  never touch host memory, so the copies do not wait for them. This lock is the host's, not one
  GPU's (below): another GPU's copies go through the same host memory and PCIe.

A process takes them in that order (GPU, uploads, host), and never asks for one it lacks while holding
a later one. Uploads and host copies are made a chunk at a time, each chunk under its own hold, so
that trials wait for one chunk, not for a whole copy.

A process that asks for a lock exclusively first takes the lock's turnstile, which shared requests
also pass through: once an exclusive request waits, no new shared holder gets in before it (no
starvation). A run takes the turnstile of its trials' longest-held lock from its start
(:func:`reserve`): the GPU's for a function task (a context creation lasts longer than its checks;
one begun during them kept its trials waiting), the uploads' for a kernel task. What others began
before goes on beside the run's untimed checks, nothing of that kind begins after, so its trials
wait only for what was begun before its checks.

Each lock is an advisory ``flock`` on a file: the GPU's is the path that the parent names in
:data:`LOCK_ENV`, the uploads' that path + ``.uploads``, the host memory's :data:`HOST_LOCK_NAME` beside a
device's GPU lock (else that path + ``.host``), and each has a turnstile beside it (+ ``.turn``); the kernel releases a lock when its holder dies, so a killed or crashed worker never
leaves it held. Without the variable (a worker run by hand), nothing is locked. Every lock file is
opened read-only (:func:`open_lock`; a ``flock`` needs no write access), so a worker's jail binds
them read-only: writable, they were a store that a candidate could keep answers in from one
evaluation to the next (review 25).

Whose locks they are (:func:`pool_lock`). On a GPU the GPU's and the uploads' files are the *device's*:
one path per GPU of the host (:func:`device_lock`, under :data:`LOCK_DIR_ENV` or the temporary
directory, named by the device the workers use), so every executor on this host that uses that GPU (a
fleet's replica, a replacement started while the old one's workers still die, a second service by
mistake) takes the same locks, and executors on other GPUs never wait for them. The host memory's lock
is the *host's* (:data:`HOST_LOCK_NAME` beside the devices' files): the traffic it keeps from a
function task's host-timed trials (other function tasks' trials, correctness calls and host copies,
kernel tasks' uploads: copies between host memory and a GPU) goes through the host's memory and PCIe
whichever GPU it is for, and pinning the replicas to cores of their own does not keep it apart. On two
H200s of one host (bench/results/2026-11-29_s21), with the lock per device, a second replica took a
function task's median up by 24 % (the median over the 13 tasks whose arguments move at 8 GB/s or more
at one replica; reduce_sum_f64 31.5 -> 45.6 ms) and by 1 % for the 10 that move under 2 GB/s, and a
correct candidate's trials from 11.9 to 19.6 (bench/probes/throughput_copies.py). :data:`HOST_SCOPE_ENV` set to
``device`` gives each GPU a host-memory lock of its own again (its files then in a directory of their
own). Without a GPU (the host and none runtimes: tests, CPU machines) each pool has a private file for
all three, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

LOCK_ENV = "REGRAPH_GPU_LOCK"
# Where the GPUs' lock files live (default: <tmp>/regraph-gpu-locks); every executor of a host must
# see the same directory for their locks to meet.
LOCK_DIR_ENV = "REGRAPH_GPU_LOCK_DIR"
# Whose host-memory lock a device's workers take: ``host`` (the default), one for every GPU whose locks
# are in the lock directory; ``device``, one per GPU (the device's files then in a directory of its own).
# Every executor of a host must use the same scope, as the same directory, for their locks to meet.
HOST_SCOPE_ENV = "REGRAPH_HOST_LOCK_SCOPE"
HOST_SCOPES = ("host", "device")
# What a worker's CUDA start-up (the driver's loading and its context's creation) holds: ``device`` (the
# default), the GPU's lock shared; ``host``, the host memory's too, so that no function task's trials on
# any GPU whose locks share the host's overlap it (issue 29's A/B: with a second replica, compute-bound
# function tasks' trials doubled under the host-wide host-memory lock, and the other replica's context
# creation is one thing that lock does not keep from them).
CONTEXT_SCOPE_ENV = "REGRAPH_CONTEXT_LOCK_SCOPE"
# Below what copy rate a function task counts as compute-bound (GB/s: the bytes of its arrays at the
# timing size over the fastest median known for it, :func:`compute_bound`), so that its trials hold the
# host memory's lock shared (:func:`function_run_shared`); 0 turns that off (every function task's
# trials hold it alone, as before). Session 21's two H200s (bench/results/2026-11-29_s21): with nothing
# keeping another replica's host traffic from them, function tasks under 2 GB/s moved by 1 %.
HOST_SHARED_ENV = "REGRAPH_HOST_SHARED_BELOW_GBPS"
HOST_SHARED_BELOW_GBPS = 2.0
# The host memory's lock file, beside the devices' GPU lock files (gpu-<device>.lock) that share it.
HOST_LOCK_NAME = "host-memory.lock"
_DEVICE_LOCK = re.compile(r"gpu-[A-Za-z0-9_.-]+\.lock")

Mode = Literal["exclusive", "shared"]
Resource = Literal["gpu", "uploads", "host"]
RESOURCES: tuple[Resource, ...] = ("gpu", "uploads", "host")

_state = threading.local()


def device_id(visible: str | None = None) -> str:
    """The GPU that this process's workers use, as a file name: the first entry of
    ``CUDA_VISIBLE_DEVICES`` (what Ray sets for a replica: an index or a UUID), else ``0`` (the device
    a worker opens when nothing is hidden)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
    first = value.split(",")[0].strip() or "0"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", first)


def lock_dir() -> Path:
    """The directory of the GPUs' lock files (:data:`LOCK_DIR_ENV`, else ``<tmp>/regraph-gpu-locks``)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "regraph-gpu-locks")


def host_lock_scope() -> str:
    """Whose host-memory lock a device's workers take (:data:`HOST_SCOPE_ENV`): ``host`` or ``device``."""
    scope = os.environ.get(HOST_SCOPE_ENV, "").strip().lower() or "host"
    if scope not in HOST_SCOPES:
        raise ValueError(f"{HOST_SCOPE_ENV} must be one of {', '.join(HOST_SCOPES)}, not {scope!r}")
    return scope


def context_lock_scope() -> str:
    """What a worker's CUDA start-up holds (:data:`CONTEXT_SCOPE_ENV`): ``device`` or ``host``."""
    scope = os.environ.get(CONTEXT_SCOPE_ENV, "").strip().lower() or "device"
    if scope not in HOST_SCOPES:
        raise ValueError(f"{CONTEXT_SCOPE_ENV} must be one of {', '.join(HOST_SCOPES)}, not {scope!r}")
    return scope


def host_shared_below_gbps() -> float:
    """The copy rate below which a function task's trials hold the host memory shared
    (:data:`HOST_SHARED_ENV`, else :data:`HOST_SHARED_BELOW_GBPS`; 0: never)."""
    text = os.environ.get(HOST_SHARED_ENV, "").strip()
    if not text:
        return HOST_SHARED_BELOW_GBPS
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{HOST_SHARED_ENV} must be a number of GB/s (0: off), not {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{HOST_SHARED_ENV} must be a finite number of GB/s >= 0 (0: off), not {text!r}")
    return value


def compute_bound(bytes_per_call: int, fastest_ms: float | None) -> bool:
    """Whether a function task whose calls move ``bytes_per_call`` (its arrays at the timing size) and
    whose known call took ``fastest_ms`` (its naive baseline's median as kept: never a candidate's)
    copies below :func:`host_shared_below_gbps`: its trials may then hold the host memory shared. Not
    known (no timing yet, no bytes) is not compute-bound: the trials hold it alone."""
    below = host_shared_below_gbps()
    if below <= 0 or fastest_ms is None or not fastest_ms > 0 or bytes_per_call <= 0:
        return False
    return bytes_per_call / (fastest_ms * 1e6) < below


def device_lock(device: str | None = None, directory: Path | None = None) -> Path:
    """The GPU lock's path of ``device`` (default :func:`device_id`) on this host: the same path for
    every executor that uses the device, another for every other device. Its host-memory lock
    (:func:`lock_path`) is the one beside it: the host's, or, with the ``device`` scope, in a
    directory of the device's own, the device's."""
    device = device or device_id()
    made = [directory or lock_dir()]
    if host_lock_scope() == "device":
        made.append(made[0] / f"device-{device}")
    for each in made:
        each.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # shared by the host's executors, whoever made it first
            each.chmod(0o1777)
    path = made[-1] / f"gpu-{device}.lock"
    path.touch(exist_ok=True)
    return path


def pool_lock(runtime: str, workdir: Path | None = None) -> tuple[Path, bool]:
    """The GPU lock's path for a pool of workers of ``runtime`` and whether the pool owns it (removes
    its files when it closes): the device's shared path on a GPU (:func:`device_lock`), else a private
    file (``workdir`` or the temporary directory), as nothing else touches the device."""
    if runtime == "gpu":
        return device_lock(), False
    handle, name = tempfile.mkstemp(prefix="regraph-gpu-", suffix=".lock", dir=workdir)
    os.close(handle)
    return Path(name), True


def open_lock(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened read-only for a ``flock``, made first (empty, mode 0644 less the umask) when it
    is missing. Read-only, so that a worker may see it through a read-only bind (its jail)."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, "rb")


def lock_path(lock: str | os.PathLike[str], resource: Resource = "gpu") -> Path:
    """The lock file of ``resource``, given the GPU lock's path ``lock``: beside it, but for a device's
    host memory (``lock`` a :func:`device_lock`), the host's file in its directory."""
    path = Path(os.fspath(lock))
    if resource == "host" and _DEVICE_LOCK.fullmatch(path.name):
        return path.parent / HOST_LOCK_NAME
    return Path(os.fspath(lock) + ("" if resource == "gpu" else f".{resource}"))


def turnstile_path(lock: str | os.PathLike[str]) -> Path:
    """The turnstile file beside the lock file ``lock``."""
    return Path(os.fspath(lock) + ".turn")


def lock_files(lock: str | os.PathLike[str]) -> list[Path]:
    """Every file that the locks named by the GPU lock's path ``lock`` may create."""
    files = [lock_path(lock, resource) for resource in RESOURCES]
    return files + [turnstile_path(f) for f in files]


@contextlib.contextmanager
def gpu_lock(mode: Mode, resource: Resource = "gpu") -> Iterator[None]:
    """Hold the executor's lock of ``resource`` in ``mode`` for the block. Re-entrant within a thread:
    a nested use holds whatever the outer one holds (an exclusive use inside a shared one is a
    programming error, raised as RuntimeError, since converting a held flock is not atomic)."""
    base = os.environ.get(LOCK_ENV)
    depths: dict[Resource, int] = _state.__dict__.setdefault("depths", {})
    modes: dict[Resource, Mode] = _state.__dict__.setdefault("modes", {})
    depth = depths.get(resource, 0)
    if depth and mode == "exclusive" and modes.get(resource) == "shared":
        raise RuntimeError(f"the {resource} lock is held shared here: it cannot be taken exclusively inside")
    if not base or depth:
        if not depth:
            modes[resource] = mode
        depths[resource] = depth + 1
        try:
            yield
        finally:
            depths[resource] -= 1
        return
    with hold(base, mode, resource):
        depths[resource], modes[resource] = 1, mode
        try:
            yield
        finally:
            depths[resource] = 0


@contextlib.contextmanager
def hold(lock: str | os.PathLike[str], mode: Mode, resource: Resource = "gpu") -> Iterator[None]:
    """Hold the lock of ``resource`` named by the GPU lock's path ``lock`` in ``mode``, whatever this
    thread already holds (not re-entrant: the evaluator's own holds, outside any worker). The lock's
    turnstile is passed through (shared) or kept until the lock is held (exclusive), unless this
    thread has it already (:func:`reserve`)."""
    path = lock_path(lock, resource)
    turnstile = turnstile_path(path)
    handle = open_lock(path)  # held across the yield
    try:
        with contextlib.ExitStack() as turn:
            if turnstile not in _reserved():
                _flock_in(turn, turnstile, fcntl.LOCK_EX)
            # An exclusive request keeps the turnstile until it holds the lock; a shared one only
            # passes through it. The turnstile is released when ``turn`` closes.
            fcntl.flock(handle, fcntl.LOCK_EX if mode == "exclusive" else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def hold_now(lock: str | os.PathLike[str], resources: tuple[Resource, ...]) -> contextlib.ExitStack | None:
    """The locks of ``resources`` named by the GPU lock's path ``lock``, each held shared, if every one
    can be had now (its turnstile passed and the lock taken without waiting); else None, nothing held.
    Close the returned stack to let them go (from any thread: a ``flock`` belongs to its open file).
    The evaluator's hold on a finished run's worker that still checks on the host
    (:mod:`executor.evaluate`): it must never wait for what that worker itself may hold."""
    stack = contextlib.ExitStack()
    try:
        for resource in resources:
            path = lock_path(lock, resource)
            handle = stack.enter_context(open_lock(path))
            with contextlib.ExitStack() as turn:
                _flock_in(turn, turnstile_path(path), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            stack.callback(fcntl.flock, handle, fcntl.LOCK_UN)
    except BlockingIOError:
        stack.close()
        return None
    except BaseException:
        stack.close()
        raise
    return stack


def hold_soon(
    lock: str | os.PathLike[str], resources: tuple[Resource, ...], within_s: float, poll_s: float = 0.001
) -> list[contextlib.ExitStack] | None:
    """:func:`hold_now` of each of ``resources`` (one stack each, in order, every one or none), tried
    again every ``poll_s`` for up to ``within_s``; None when they could not all be had by then. Every
    request of a lock passes its turnstile, shared ones too, and right after a run lets its locks go
    the requests that waited for them meanwhile (spares making their CUDA context, prepared workers'
    upload chunks) pass it one after another, each until it is scheduled: a single try of the
    evaluator's hold for a released worker failed then for 18 of 67 correct function candidates on an
    H200 with 16 clients (session 31's records), whose host checks so stayed under the turn. Bounded,
    so it never waits long for what the worker itself may hold alone (that costs at most ``within_s``
    more of the turn, which is then kept as before)."""
    until = time.monotonic() + within_s
    while True:
        held: list[contextlib.ExitStack] = []
        try:
            for resource in resources:
                stack = hold_now(lock, (resource,))
                if stack is None:
                    break
                held.append(stack)
        except BaseException:  # a lock that cannot be opened, say: the ones taken are let go (review 33)
            for stack in held:
                stack.close()
            raise
        if len(held) == len(resources):
            return held
        for stack in held:
            stack.close()
        if time.monotonic() >= until:
            return None
        time.sleep(poll_s)


def held_elsewhere(lock: str | os.PathLike[str], resource: Resource = "gpu") -> bool:
    """Whether anyone (another process, or another open of the file in this one) holds the lock of
    ``resource`` named by the GPU lock's path ``lock`` now, shared or exclusively: a non-blocking
    exclusive try, let go at once (it waits for nobody and passes no turnstile; a request arriving in
    those microseconds waits that long)."""
    return would_wait(lock_path(lock, resource), fcntl.LOCK_EX)


def would_wait(path: str | os.PathLike[str], how: int) -> bool:
    """Whether a ``flock`` of ``path`` with ``how`` (``fcntl.LOCK_SH`` or ``LOCK_EX``) would wait now: a
    non-blocking try, let go at once."""
    with open_lock(path) as handle:
        try:
            fcntl.flock(handle, how | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def host_memory_blocked(lock: str | os.PathLike[str]) -> bool:
    """Whether a shared request of the host memory's lock named by the GPU lock's path ``lock`` would
    wait now: someone holds that lock alone (a copy-bound function task's trials, on any GPU of the
    host) or waits for it at its turnstile. Non-blocking tries, let go at once (a request arriving in
    those microseconds waits that long). The parent's measure of how long a released worker's host
    checks (:func:`host_copies`) could not begin, no fault of its candidate
    (executor.sandbox.WorkerProcess.wait)."""
    path = lock_path(lock, "host")
    return would_wait(path, fcntl.LOCK_SH) or would_wait(turnstile_path(path), fcntl.LOCK_EX)


def _flock_in(stack: contextlib.ExitStack, path: Path, how: int) -> None:
    """Open ``path`` in ``stack`` and ``flock`` it with ``how``; unlocked before the file is closed. A
    ``flock`` belongs to the open file: a process forked meanwhile by another thread (before its exec,
    or one that never execs) holds a copy, which would keep a lock let go only by closing the file."""
    handle = stack.enter_context(open_lock(path))
    fcntl.flock(handle, how)
    stack.callback(fcntl.flock, handle, fcntl.LOCK_UN)


def _reserved() -> set[Path]:
    """The turnstiles that this thread holds through :func:`reserve`."""
    reserved: set[Path] = _state.__dict__.setdefault("reserved", set())
    return reserved


@contextlib.contextmanager
def reserve(*resources: Resource) -> Iterator[None]:
    """Hold the turnstiles of ``resources``' locks for the block: no new request of them gets in (shared
    ones included) while those who hold them go on, so an exclusive request of this thread in the
    block waits only for holders that got in before it began. Requests of this thread (shared or
    exclusive) do not wait at the turnstiles it holds. Without :data:`LOCK_ENV`, nothing is held."""
    base = os.environ.get(LOCK_ENV)
    reserved = _reserved()
    with contextlib.ExitStack() as stack:
        for resource in resources:
            if not base:
                break
            turnstile = turnstile_path(lock_path(base, resource))
            if turnstile in reserved:
                continue
            _flock_in(stack, turnstile, fcntl.LOCK_EX)
            reserved.add(turnstile)
            stack.callback(reserved.discard, turnstile)  # before the file closes (last in, first out)
        yield


@contextlib.contextmanager
def context_creation() -> Iterator[None]:
    """What a worker's CUDA start-up holds (:func:`context_lock_scope`): the GPU shared and, with the
    ``host`` scope, the host memory shared too."""
    with gpu_lock("shared"):
        if context_lock_scope() == "host":
            with gpu_lock("shared", "host"):
                yield
        else:
            yield


def context_lock_covers_init() -> bool:
    """Whether the driver's loading is held under :func:`context_creation` too (the ``host`` scope)."""
    return context_lock_scope() == "host"


def gpu_exclusive() -> contextlib.AbstractContextManager[None]:
    """Hold the GPU lock alone (see the module's docstring for who does)."""
    return gpu_lock("exclusive")


def gpu_shared() -> contextlib.AbstractContextManager[None]:
    """Hold the GPU lock alongside other shared holders, never alongside an exclusive one."""
    return gpu_lock("shared")


@contextlib.contextmanager
def function_checks() -> Iterator[None]:
    """What a function task's correctness calls hold: the GPU and the host memory, both shared (the
    calls are not timed; no run of another candidate overlaps them, the evaluator sees to that)."""
    with gpu_lock("shared"), gpu_lock("shared", "host"):
        yield


@contextlib.contextmanager
def function_run() -> Iterator[None]:
    """What a function task's trials hold: the GPU, the uploads and the host memory, all alone."""
    with gpu_lock("exclusive"), gpu_lock("exclusive", "uploads"), gpu_lock("exclusive", "host"):
        yield


@contextlib.contextmanager
def function_run_shared() -> Iterator[None]:
    """What a compute-bound function task's trials hold (:func:`compute_bound`): the GPU and the uploads
    alone, the host memory shared. Other GPUs' compute-bound trials, correctness calls and kernel
    uploads go on beside them, and any function task's prepared host copies (its own GPU's next
    candidate's too: they hold only the host memory, shared); a copy-bound task's trials, which hold it alone,
    do not (and, once one waits at the lock's turnstile, no new shared holder gets in before it)."""
    with gpu_lock("exclusive"), gpu_lock("exclusive", "uploads"), gpu_lock("shared", "host"):
        yield


def function_reserve() -> contextlib.AbstractContextManager[None]:
    """What a function task's run reserves from its start (:func:`reserve`): the GPU's lock, so that no
    context creation begins while its checks run (one begun then kept its trials waiting)."""
    return reserve("gpu")


@contextlib.contextmanager
def kernel_run() -> Iterator[None]:
    """What a kernel task's trials hold: the GPU shared and the uploads alone."""
    with gpu_lock("shared"), gpu_lock("exclusive", "uploads"):
        yield


def kernel_reserve() -> contextlib.AbstractContextManager[None]:
    """What a kernel task's run reserves from its start (:func:`reserve`): the uploads' lock."""
    return reserve("uploads")


@contextlib.contextmanager
def kernel_uploads() -> Iterator[None]:
    """What a chunk of a kernel task's prepared uploads holds: the uploads and the host memory, shared
    (never beside a kernel task's trials, which hold the uploads alone, nor beside a function task's
    trials on any GPU of the host, which hold the host memory alone: an upload is a copy out of host
    memory like theirs)."""
    with gpu_lock("shared", "uploads"), gpu_lock("shared", "host"):
        yield


def host_copies() -> contextlib.AbstractContextManager[None]:
    """What a function task's prepared host copies hold: the host memory, shared (never beside a
    function task's run)."""
    return gpu_lock("shared", "host")
