"""The candidate process (the *runner*): a function candidate's library runs here, not in its checker.

A function task's candidate is native code loaded into a process. When that process was the worker, the
code could read whatever the worker held (every timing set's inputs, before the trials: review 22b
filled a memo of every answer from them, 2,176-3,504x, every check passed) and rewrite what the worker
computes (its clock, its checks). By default (:data:`CANDIDATE_PROCESS_ENV` ``auto``: wherever a runner
can confine itself, :func:`candidate_process`), the candidate worker (:mod:`executor.worker.candidate`)
starts a runner, ``python -m executor.worker runner candidate {host|gpu}``, as its own child, in its own jail
and process group, before the candidate arrives; the runner loads the library and calls it, and holds
nothing else:

* the inputs of a call come in a shared mapping (a ``memfd``) that the worker fills and hands over
  (:class:`SharedArrays`) with the request of the first call made on it, inside that call's timing
  (so no timed call's values are in the runner before that set is timed, and what the runner does
  when it maps a set is timed: review 23b computed each answer there while the hand-over was a
  request of its own); the worker reads the outputs back after the call's acknowledgement. A set's
  ``in`` arrays are in a memfd of their own, sealed once the worker has mapped it, which the runner
  can only read (session 39: review 39's H2 wrote its input and had a timer restore it before the
  worker's check; no kill after the trials is soon enough): a write to one ends the runner with
  SIGSEGV, a ``crash`` (:class:`SharedArrays`, :func:`input_seal`, :data:`SEAL_ENV`);
* the expected outputs, the other sets, the seeds, the clock and the verdict stay in the worker, which
  times each call with its own clock around the request and its acknowledgement (:meth:`Runner.call`),
  announced to the executor as before (:class:`~executor.worker.runtime.CallWatch`). The fastest of
  20 empty round trips, measured before the load (none of the candidate's code answers them), is
  reported (``seconds["runner_roundtrip"]``) and taken off every timed call, and no more; a load after
  which they are much slower is refused. Every request other than a call has a deadline;
* each acknowledgement must echo the request's random nonce, so the runner cannot answer a call before
  it is asked (a reply queued ahead would otherwise read as a call of no time);
* before the worker checks what the trials left, it kills the runner (a process the runner forked is
  not killed with it: review 23b, not closed); the worker makes itself non-dumpable first, so that the
  runner (the same uid) cannot trace it or read its memory through ``/proc``. Where the repeat-visit
  rule asks for a confirming call, the worker makes it in a fresh runner, loaded and warmed up then,
  and kills that one at the call's acknowledgement, before it copies what the call left
  (:meth:`executor.worker.host.RunnerFunctionRuntime.confirming_runtime`; review 38's M1, review 39).

A runner that dies, exits or breaks the protocol once its library is asked to load is the candidate's
failure: the worker ends itself the same way (the same signal, or the same exit status), so the
executor's verdict is what it was when the candidate ran in the worker (``crash``; ``timeout`` when the
executor killed a call past its limit; the runner is in the worker's process group and dies with it).
Before that, nothing of the candidate's has run in it: a runner that dies, stalls or fails then is
``runtime_not_available``, with how it ended, the host's Landlock and the end of its stderr (a file of
its own, :data:`RUNNER_STDERR`). The worker waits for its start-up at the end of its preparation
(:meth:`Runner.start`), outside the run's limit.

The runner is started with nothing run between the fork and the exec (a GPU worker has the CUDA
driver's threads then) and is given none of the executor's locks: the worker holds them for it. The GPU
function runtime's runner loads the driver ahead and makes its own CUDA context at the worker's
``start`` request, under the worker's shared GPU lock; the L2 flush before a timed call and the device
synchronisation that ends it run there, inside the call's request. Its first GPU run (session 24)
failed; the lock and the fork are what changed since (bench/device/runner_check.sh).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import itertools
import json
import logging
import mmap
import os
import platform
import secrets
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from pydantic import TypeAdapter

from executor.abi import bind_entry, call_entry
from executor.gpulock import LOCK_ENV
from executor.jail import DEVICES, HOST_PATHS, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, gpu_paths, python_paths
from executor.taskformat import FunctionTask, KernelTask, Task
from executor.verdict import ErrorKind
from executor.worker.messages import DONE_FD_ENV
from executor.worker.runtime import CandidateFailed

logger = logging.getLogger(__name__)

# Where a function candidate runs (in the executor's environment; candidate_process): ``auto`` (the
# default, DEFAULT_CANDIDATE_PROCESS) in a runner wherever a runner can confine itself (Landlock and its
# seccomp filter, probed once per process: runner_confinement), else, where the probe said why not, in
# its worker (a probe that gave no answer chooses the runner); ``1`` (or
# true/on/yes) always in a runner, which refuses the candidate where it cannot confine itself; ``0`` (or
# false/off/no) always in its worker, as before session 23 (executor.worker.host.HostFunctionRuntime,
# executor.worker.gpu.GpuFunctionRuntime). Anything else stops the executor's start. The executor hands
# its workers the choice made (1 or 0), never ``auto``: a worker does not probe, and the executor's
# checks (executor.clockcheck's own_process) know where each candidate ran.
CANDIDATE_PROCESS_ENV = "REGRAPH_EXECUTOR_CANDIDATE_PROCESS"
DEFAULT_CANDIDATE_PROCESS = "auto"
# How long the confinement probe (``python -m executor.worker runner probe``) may take.
PROBE_S = 60.0
# The runner's end of its socket (an inherited descriptor).
RUNNER_FD_ENV = "REGRAPH_RUNNER_FD"
# The worker's process id: a runner whose parent is already another (the worker died before the runner
# set its parent-death signal) exits at once.
RUNNER_PARENT_ENV = "REGRAPH_RUNNER_PARENT"
# A request or a reply is at most this long (a task's JSON, a call's scalars, a failure's message).
MESSAGE_BYTES = 1 << 20
REPLY_BYTES = 4096
# Empty round trips measured before the load (their fastest is reported and taken off each timed
# call), and again after it: a load after which the fastest is this much slower (times, plus seconds)
# is refused (the candidate's code answers the pings then, and could slow them to have more taken off).
ROUNDTRIPS = 20
ROUNDTRIP_SLOWER, ROUNDTRIP_SLACK_S = 4.0, 0.0002
# How long the runner may take to answer a request that is not timed (its start-up: its first; its
# CUDA context; the load; any other): beyond it, the candidate is refused. A call has the executor's
# limit instead.
START_S, LOAD_S, UNTIMED_S = 60.0, 120.0, 5.0
PR_SET_DUMPABLE = 4
# The runner's stderr: a file of its own in the worker's directory (opened there by the worker, so the
# runner writes it through the descriptor it inherits, Landlock or not). What it holds before the load
# request is the runner's own (no code of the candidate's has run): a runner that fails before its
# library is loaded shows its end in the verdict. What it holds after is the candidate's to choose and
# is shown nowhere; a runner that dies then has it copied to the worker's stderr (as when the runner
# wrote there), which a verdict does not show either.
RUNNER_STDERR = "runner.stderr"
STDERR_SHOWN, STDERR_COPIED = 2000, 64 * 1024
_PACKAGE = Path(__file__).resolve().parent.parent
_keys = itertools.count(1)


class SharedArrays:
    """Arrays laid out in shared mappings (``memfd`` files) that the worker fills and a runner maps.

    ``readonly`` names the arrays the candidate must not change (the task's ``in`` arrays, declared
    ``const``): they are laid out in a memfd of their own, which the worker maps (read-write) and then
    seals (:data:`INPUT_SEALS`), so that from then on no new mapping of it may write and no write
    through any descriptor of it is taken: the runner maps it read-only, and the kernel refuses it
    write access by every way the runner has (mprotect, a writable mapping, write(2), the descriptor
    reopened through ``/proc``; tests/unit/executor/test_input_seal.py). The worker's own mapping
    stays writable (it fills the set after this, and refills :meth:`~executor.worker.host.FunctionRuntime.run`'s
    buffers before each call). Where this kernel refuses the seal (:func:`input_seal`), every array
    is in the one read-write memfd, as before session 39. The other arrays (``out``, ``inout``) are in
    a read-write memfd. ``arrays`` is what an :class:`~executor.inputs.InputSet` of the worker holds
    (views of the mappings); ``fds`` the memfds (read-write, then the sealed one where there is one);
    ``layout`` tells the runner where each array is (name, shape, dtype, offset, index in ``fds``)."""

    def __init__(
        self, shapes: Iterable[tuple[str, tuple[int, ...], np.dtype[Any]]], readonly: Collection[str] = ()
    ) -> None:
        self.key = next(_keys)
        sealed = input_seal() is None
        self.layout: list[tuple[str, list[int], str, int, int]] = []
        ends = [0, 0]  # the bytes laid out in each memfd: read-write, sealed
        for name, shape, dtype in shapes:
            part = SEALED_PART if sealed and name in readonly else 0
            self.layout.append((name, list(shape), dtype.str, ends[part], part))
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            ends[part] += -(-max(nbytes, 1) // 64) * 64
        self.fds = [os.memfd_create(f"regraph-set-{self.key}", os.MFD_CLOEXEC)]
        if ends[SEALED_PART]:
            self.fds.append(
                os.memfd_create(f"regraph-set-{self.key}-in", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            )
        try:
            for fd, end in zip(self.fds, ends, strict=False):
                os.ftruncate(fd, max(end, mmap.PAGESIZE))
            self.arrays = view_arrays(self.fds, self.layout)
            if ends[SEALED_PART]:
                # After the worker's mapping is made: F_SEAL_FUTURE_WRITE leaves the mappings made
                # before it writable, and refuses every later one write access.
                fcntl.fcntl(self.fds[SEALED_PART], _F_ADD_SEALS, INPUT_SEALS)
        except BaseException:
            self.close()
            raise

    @classmethod
    def like(cls, arrays: dict[str, np.ndarray], readonly: Collection[str] = ()) -> SharedArrays:
        """Empty shared arrays of the shapes and types of ``arrays``, those named in ``readonly`` in the
        sealed memfd."""
        return cls(((name, a.shape, a.dtype) for name, a in arrays.items()), readonly)

    def close(self) -> None:
        """Let the descriptors go (the mappings stay while their arrays are used)."""
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def const_inputs(task: FunctionTask | KernelTask) -> frozenset[str]:
    """The arrays of ``task`` that a call must not change (intent ``in``, declared ``const``): a
    runner's :class:`SharedArrays` holds them in its sealed memfd."""
    return frozenset(a.name for a in task.arrays if a.intent == "in")


# The sealed memfd's place in SharedArrays.fds (and in a layout's entries).
SEALED_PART = 1
# F_ADD_SEALS and the seals of a set's const inputs: F_SEAL_FUTURE_WRITE (Linux 5.1; Python's fcntl
# does not name it), no growing, no shrinking (a hole punched, the file cut: both would change what the
# worker's mapping reads), and no seal added or taken off later.
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
F_SEAL_FUTURE_WRITE = 0x10
INPUT_SEALS = F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL


# Set to 0/false/off/no (in the executor's environment, which passes it to the workers) to leave a
# runner's const inputs in its read-write mapping, as before session 39 (then checked only after the
# calls, and review 39's H2 restores them in time): for debugging, a GPU candidate that page-locks its
# inputs with cudaHostRegister's default flags (refused on read-only memory; cudaHostRegisterReadOnly
# works), or a test of that behaviour. Said where a candidate's process is described (candidate_process).
SEAL_ENV = "REGRAPH_EXECUTOR_RUNNER_SEAL"


def input_seal() -> str | None:
    """None where a runner's const inputs are sealed (:class:`SharedArrays`): this kernel seals a memfd
    so that its descriptor then takes no write (probed once per process) and :data:`SEAL_ENV` is not
    off; else why not (a kernel older than 5.1, or the switch): a runner then maps them read-write, as
    before session 39, which is said once in this process's log and in :func:`candidate_process`'s
    line."""
    why = kernel_seal()
    if why is None and not seal_wanted():
        why = f"{SEAL_ENV} is off"
    if why is not None:
        _say_unsealed(why)
    return why


def switch_on(name: str) -> bool:
    """Whether the operator's switch ``name`` (an environment variable: :data:`SEAL_ENV`,
    :data:`LANDLOCK_ENV`, the jail's) is on: on unless set to 0/false/off/no."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "off", "no")


def seal_wanted() -> bool:
    """Whether a runner's const inputs are to be sealed (:data:`SEAL_ENV`)."""
    return switch_on(SEAL_ENV)


@functools.cache
def kernel_seal() -> str | None:
    """None where this kernel takes :data:`INPUT_SEALS` on a memfd and then refuses a write through its
    descriptor, else why not."""
    try:
        fd = os.memfd_create("regraph-seal-probe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    except OSError as e:
        return f"no sealable memfd here ({e.strerror})"
    try:
        os.ftruncate(fd, mmap.PAGESIZE)
        try:
            fcntl.fcntl(fd, _F_ADD_SEALS, INPUT_SEALS)
        except OSError as e:
            return f"the kernel refused F_SEAL_FUTURE_WRITE ({e.strerror}; it needs Linux 5.1+)"
        try:
            os.pwrite(fd, b"\0", 0)
        except PermissionError:
            return None
        return "the kernel took F_SEAL_FUTURE_WRITE and then a write through the descriptor"
    finally:
        os.close(fd)


@functools.cache
def _say_unsealed(why: str) -> None:
    logger.warning("a function candidate's process can write its const inputs here: %s", why)


def view_arrays(
    fds: list[int], layout: list[tuple[str, list[int], str, int, int]], read_only: Collection[int] = ()
) -> dict[str, np.ndarray]:
    """The arrays of ``layout`` in shared mappings of the whole of each of ``fds``; those of the
    descriptors whose index is in ``read_only`` mapped read-only (a runner's of the sealed memfd: the
    kernel refuses it a writable one)."""
    regions = []
    for index, fd in enumerate(fds):
        size = os.fstat(fd).st_size
        prot = mmap.PROT_READ if index in read_only else mmap.PROT_READ | mmap.PROT_WRITE
        # Its page tables filled now: a runner's first timed call on a set must not pay a fault per page
        # (a 42 ms call on a large set took up to 4x that on its first visit, and the trials grew).
        region = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=prot)
        # Huge pages where the host lets shared memory have them (``shmem_enabled`` at ``advise``): at
        # ``never`` a memory-bound call on a 96 MB set ran 20 % slower than on numpy's (huge-page) arrays.
        with contextlib.suppress(OSError, AttributeError):
            region.madvise(mmap.MADV_HUGEPAGE)
        regions.append(region)
    return {
        name: np.ndarray(tuple(shape), np.dtype(dtype), buffer=regions[part], offset=offset)
        for name, shape, dtype, offset, part in layout
    }


class Runner:
    """The worker's side of a runner: starts it, hands it mappings, asks it to call, times nothing
    itself (:meth:`call` is timed by its caller)."""

    def __init__(self, runtime: str) -> None:
        # Nothing the runner starts may trace this process or read its memory (same uid).
        with_libc = ctypes.CDLL(None, use_errno=True)
        if with_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            logger.warning("the worker could not make itself non-dumpable")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Not the executor's locks: the worker holds them for the runner (its context is made, and
        # each of its calls runs, inside the worker's holds). A runner that took one itself waited,
        # forever, at the turnstile its own worker's run holds (executor.gpulock.reserve).
        env = {k: v for k, v in os.environ.items() if k not in (DONE_FD_ENV, LOCK_ENV)}
        env[RUNNER_FD_ENV] = str(theirs.fileno())
        env[RUNNER_PARENT_ENV] = str(os.getpid())
        cwd = os.getcwd()  # the worker's own directory
        self.stderr_path = Path(cwd) / RUNNER_STDERR
        try:
            with open(self.stderr_path, "ab") as stderr:
                # Where this runner's part of the file begins: a fresh runner (the repeat-visit
                # rule's confirming call) appends after the trials' runner, whose candidate wrote
                # there; none of that is quoted as this runner's own (review 39b's L4).
                self.stderr_start = os.fstat(stderr.fileno()).st_size
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "executor.worker", "runner", "candidate", runtime],
                    stdin=subprocess.DEVNULL,
                    stderr=stderr,
                    cwd=cwd,
                    env=env,
                    pass_fds=(theirs.fileno(),),
                    # Nothing runs between the fork and the exec (no preexec_fn: Python then uses
                    # vfork): this process has the CUDA driver's threads on a GPU, and code run in
                    # the child of a threaded process (Python's, and the atfork handlers a fork runs)
                    # may wait forever for a lock a thread held at the fork. The runner sets its
                    # parent-death signal itself (serve); the uid, the jail and no-new-privileges
                    # are the worker's, inherited.
                )
        finally:
            theirs.close()
        self.sock = ours
        self.mapped: set[int] = set()
        self.runtime = runtime
        self.started = False
        # Where the runner's stderr stood when the load was asked for (None: not yet): from then on,
        # the candidate's code may have run in it.
        self.trusted_bytes: int | None = None
        # A failure before the load (the runner's own), raised again at every later request.
        self.failure: CandidateFailed | None = None

    def start(self) -> None:
        """Wait for the runner's start-up (its first answer) and, on a GPU, have it make its CUDA
        context while this worker holds the GPU lock shared (as a worker's own context is made: what
        other workers' trials see); the runner loads and initialises the driver before, unlocked.
        Called once the worker's inputs are prepared, outside the candidate's run (whose limit a slow
        start-up then does not eat), and again (at once) by the first round trip. A runner that
        dies, stalls or fails here is not the candidate's doing: the failure (its stderr's end and
        what this host's Landlock is) is kept and raised by every request from then on."""
        if self.started or self.failure is not None:
            return
        with contextlib.suppress(CandidateFailed):
            self.request("ping", deadline_s=START_S)
            if self.runtime == "gpu":
                from executor.gpulock import gpu_shared

                with gpu_shared():
                    self.request("start", deadline_s=START_S)
            self.started = True

    def request(
        self, op: str, fds: list[int] | None = None, deadline_s: float | None = UNTIMED_S, **fields: Any
    ) -> None:
        """Send one request and wait for its acknowledgement, at most ``deadline_s`` (None: a call,
        which the executor's call limit bounds); a failure the runner reports is raised as
        :class:`CandidateFailed`, and a runner that is gone ends this process the way it ended (before
        the load: :meth:`fail_before_load`)."""
        if self.failure is not None:
            raise self.failure
        nonce = secrets.token_hex(8)
        message = json.dumps({"op": op, "nonce": nonce, **fields}).encode()
        self.sock.settimeout(deadline_s)
        try:
            if fds:
                socket.send_fds(self.sock, [message], fds)
            else:
                self.sock.send(message)
            reply = self.sock.recv(REPLY_BYTES)
        except TimeoutError:
            if self.trusted_bytes is None:
                self.fail_before_load(f"did not answer the request '{op}' within {deadline_s:g} s")
            raise CandidateFailed(
                ErrorKind.TIMEOUT,
                f"the candidate's process did not answer the request '{op}' (not timed) within {deadline_s:g} s",
            ) from None
        except OSError:
            reply = b""
        if not reply:
            if self.trusted_bytes is None:
                self.fail_before_load(f"ended at the request '{op}'", ended=True)
            self.mirror_fate()
        try:
            self.check_reply(reply, nonce)
        except CandidateFailed as e:
            if self.trusted_bytes is None:
                self.fail_before_load(f"failed the request '{op}': {e}")
            raise

    def fail_before_load(self, what: str, ended: bool = False) -> NoReturn:
        """The runner failed before the candidate's library was asked to load (so on its own: at its
        start-up, its CUDA context): kill it and raise, and keep, a ``runtime_not_available`` failure
        that says how it ended, what this host's Landlock is, and the end of its stderr (all of it
        written by the runner's own code)."""
        with contextlib.suppress(subprocess.TimeoutExpired):  # it closed its socket: it may be exiting
            self.proc.wait(timeout=5.0 if ended else 0.0)
        alive = self.proc.poll() is None
        if alive:
            self.proc.kill()
        code = self.proc.wait()
        fate = f"died from {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
        if alive:
            fate = "was still running (killed now)"
        tail = self.stderr_tail(None)
        self.failure = CandidateFailed(
            ErrorKind.RUNTIME_NOT_AVAILABLE,
            f"the candidate's process {what}, before the candidate was loaded; it {fate} "
            f"[{landlock_facts()}]" + (f"; its stderr ends:\n{tail}" if tail else "; its stderr is empty"),
        )
        raise self.failure

    def stderr_tail(self, limit: int | None, trusted: bool = True) -> str:
        """The end of this runner's stderr (from its start): the part written before the load
        (``trusted``), or after."""
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        cut = len(data) if self.trusted_bytes is None else self.trusted_bytes
        cut = max(cut, self.stderr_start)
        part = data[self.stderr_start : cut] if trusted else data[cut:]
        return part[-(limit or STDERR_SHOWN) :].decode("utf-8", "replace").strip()

    @staticmethod
    def check_reply(reply: bytes, nonce: str) -> None:
        """Accept ``ok NONCE``; a reported failure (``fail NONCE KIND MESSAGE``) is raised; anything
        else is the candidate's breach of the protocol."""
        text = reply.decode("utf-8", "replace")
        if text == f"ok {nonce}":
            return
        head, _, rest = text.partition(" ")
        got, _, rest = rest.partition(" ")
        if head == "fail" and got == nonce:
            kind, _, message = rest.partition(" ")
            kinds = (ErrorKind.CUDA_ERROR, ErrorKind.RUNTIME_NOT_AVAILABLE)
            error = next((k for k in kinds if k.value == kind), ErrorKind.CRASH)
            raise CandidateFailed(error, message[:2000])
        raise CandidateFailed(
            ErrorKind.CRASH, "the candidate's process answered a request it was not sent (a forged reply)"
        )

    def mirror_fate(self) -> None:
        """The runner is gone (or closed its socket): end this process as it ended, so that the executor
        reports the candidate's crash or exit as it always did. Never returns."""
        try:
            code = self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        # What it wrote since its load, where it wrote before it had a file of its own.
        sys.stderr.write(self.stderr_tail(STDERR_COPIED, trusted=False) + "\n")
        sys.stderr.flush()
        if code < 0:
            if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            time.sleep(1.0)
            os._exit(128 - code)
        os._exit(code)

    def load(self, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        """Load the candidate's library in the runner and bind its entry."""
        self.start()
        if self.failure is not None:
            raise self.failure
        try:
            self.trusted_bytes = self.stderr_path.stat().st_size
        except OSError:
            self.trusted_bytes = 0
        self.request(
            "load", deadline_s=LOAD_S, task=task.model_dump(mode="json"), product=product, symbol=symbol
        )

    def drop(self, shared: SharedArrays) -> None:
        """Unmap ``shared`` in the runner."""
        if shared.key in self.mapped:
            self.mapped.discard(shared.key)
            self.request("unmap", key=shared.key)

    def call(self, shared: SharedArrays, scalars: dict[str, Any], flush: bool = False) -> None:
        """One call of the candidate on ``shared`` (and its device synchronisation on a GPU; ``flush``:
        the device's L2 flushed first). A mapping the runner does not have yet goes with the request,
        so that whatever the runner does when it maps it is inside the call (and its timing)."""
        if shared.key in self.mapped:
            self.request("call", deadline_s=None, key=shared.key, scalars=scalars, flush=flush)
            return
        self.mapped.add(shared.key)
        self.request(
            "call", shared.fds, None, key=shared.key, layout=shared.layout, scalars=scalars, flush=flush
        )

    def roundtrip_s(self, op: str = "ping", repeats: int = ROUNDTRIPS) -> float:
        """The fastest of ``repeats`` round trips of ``op`` (``ping``: an empty one, what the split adds
        to every timed call; ``flush`` adds a GPU's L2 flush), after the runner's start-up
        (:meth:`start`)."""
        self.start()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            self.request(op)
            best = min(best, time.perf_counter() - start)
        return best

    def stop(self) -> None:
        """Kill the runner and wait for it (its mappings go with it)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.sock.close()


# --- The runner process ---------------------------------------------------------------------------

# Landlock (Linux 5.13+): an unprivileged process's own limit on the files it may open from now on.
_LANDLOCK_CREATE, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT = 444, 445, 446
_LANDLOCK_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_FILE = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE  # the rights a rule on a file may carry
_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_ALL = (1 << 13) - 1  # every right of Landlock's first version (all its kernels know them)
_SCOPE_SIGNAL = 1 << 1  # LANDLOCK_SCOPE_SIGNAL (ABI 6, Linux 6.12)


# Set to 0/false/off/no (in the executor's environment, which passes it to the workers) to run the
# runners unconfined, without Landlock and without their seccomp filter (forbid_processes): for
# debugging, or a host where either keeps an honest candidate from what it needs (neither has run on a
# GPU yet). Unless it is off, a runner that cannot confine itself refuses to load the candidate
# (runtime_not_available).
LANDLOCK_ENV = "REGRAPH_EXECUTOR_RUNNER_LANDLOCK"


def landlock_facts() -> str:
    """What a runner's confinement is on this host, for a failure's message."""
    version = landlock_version()
    if not landlock_wanted():
        return f"Landlock ABI {version} here, off for the candidate's process ({LANDLOCK_ENV})"
    return (
        f"Landlock ABI {version} here; the candidate's process handles only ABI 1's file rights (device "
        f"ioctls are not restricted){', and signals are scoped' if version >= 6 else ''}"
        if version
        else "no Landlock here"
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def candidate_process_mode() -> str:
    """:data:`CANDIDATE_PROCESS_ENV` as ``auto``, ``1`` or ``0`` (unset or empty:
    :data:`DEFAULT_CANDIDATE_PROCESS`); any other value raises ValueError, which names the variable and
    what it may be (the executor reads it at its start: :class:`executor.evaluate.Evaluator`)."""
    text = os.environ.get(CANDIDATE_PROCESS_ENV, "").strip().lower() or DEFAULT_CANDIDATE_PROCESS
    if text in ("1", "true", "on", "yes"):
        return "1"
    if text in ("0", "false", "off", "no"):
        return "0"
    if text == "auto":
        return "auto"
    raise ValueError(
        f"{CANDIDATE_PROCESS_ENV} must be auto (the default: a function candidate in a process of its own "
        "wherever that process can be confined, else in its worker), 1 (always in a process of its own; "
        "refused where it cannot be confined; also true/on/yes) or 0 (always in its worker; also "
        f"false/off/no), not {os.environ.get(CANDIDATE_PROCESS_ENV)!r}"
    )


# The probe's answer, once per process (runner_confinement): (why not, or None; whether the probe answered).
_confinement: list[tuple[str | None, bool]] = []
_confinement_lock = threading.Lock()


def runner_confinement() -> tuple[str | None, bool]:
    """Whether a runner can confine itself here (Landlock and its seccomp filter): ``(None, True)`` where
    it can, ``(WHY, True)`` where it cannot and the probe said why, and ``(WHAT, False)`` where the probe
    gave no answer of its own (it could not start, ran past :data:`PROBE_S`, exited non-zero or wrote
    something else): a process of the runner's (``python -m executor.worker runner probe``) confines
    itself as a runner does before it loads a candidate (:func:`confine_runner`) and says how that went.
    With :data:`LANDLOCK_ENV` off, not probed (a runner would not confine itself): a known answer.

    Probed once per process, and a probe that gave no answer is kept as well, not retried: what it
    chooses (:func:`candidate_process`: the runner, which refuses a candidate where it cannot confine
    itself) is safe to keep, and a retry at each worker's start could cost up to :data:`PROBE_S` each."""
    if not landlock_wanted():
        return f"{LANDLOCK_ENV} is off", True
    with _confinement_lock:
        if not _confinement:
            _confinement.append(_probe_confinement())
        return _confinement[0]


def _probe_confinement() -> tuple[str | None, bool]:
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_PACKAGE.parent), path]))}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "executor.worker", "runner", "probe"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=PROBE_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"its probe failed: {e}", False
    answer = done.stdout.strip()
    if done.returncode == 0 and answer == "confined":
        return None, True
    if done.returncode == 0 and answer.startswith("not confined: "):
        return answer.removeprefix("not confined: "), True
    said = f"; it wrote {answer[-200:]!r}" if answer else ""
    return f"its probe exited with status {done.returncode}{said}: {done.stderr.strip()[-500:]}", False


def candidate_process() -> tuple[bool, str]:
    """Whether a function candidate runs in a runner here (:data:`CANDIDATE_PROCESS_ENV`; ``auto``: where
    :func:`runner_confinement` finds that a runner can confine itself, and, failing closed, where its
    probe gave no answer), and one line that says where it runs and why (the executor's device
    description and start log, the first lines of each candidate worker's log). Raises ValueError for a
    value of the variable it does not know. Where it runs in a process of its own, the line also says
    whether its const inputs are read-only there (:func:`const_inputs_said`)."""
    runs, where = _where_candidates_run()
    return runs, f"{where}; {const_inputs_said()}" if runs else where


def const_inputs_said() -> str:
    """Whether a runner's const inputs are read-only here (:func:`input_seal`), in words: a candidate
    that writes one dies from SIGSEGV there, and a crash's verdict shows this line (a worker's log
    begins with it) to say why."""
    why = input_seal()
    if why is None:
        return (
            "its const (in) arrays are mapped read-only there, from a sealed memfd: a write to one ends "
            "that process with SIGSEGV"
        )
    return f"its const (in) arrays are writable there, and checked only after its calls: {why}"


def _where_candidates_run() -> tuple[bool, str]:
    mode = candidate_process_mode()
    if mode == "0":
        return False, f"a function candidate runs in its worker's process ({CANDIDATE_PROCESS_ENV}=0)"
    if mode == "1":
        how = (
            "refused where it cannot be confined"
            if landlock_wanted()
            else f"not confined beyond the worker's jail: {LANDLOCK_ENV} is off"
        )
        return True, f"a function candidate runs in a process of its own ({CANDIDATE_PROCESS_ENV}=1; {how})"
    why, answered = runner_confinement()
    if why is None:
        return True, (
            "a function candidate runs in a process of its own, confined by Landlock and a seccomp "
            f"filter ({CANDIDATE_PROCESS_ENV}=auto)"
        )
    if not answered:
        # Fail closed: only the probe's own answer runs candidates in their workers; a runner that then
        # cannot confine itself refuses the candidate (runtime_not_available), as under 1.
        return True, (
            "a function candidate runs in a process of its own, refused where it cannot be confined: "
            f"the probe of its confinement gave no answer ({why}; {CANDIDATE_PROCESS_ENV}=auto)"
        )
    return False, (
        f"a function candidate runs in its worker's process, where it can read and change what the "
        f"worker holds: a process of its own cannot be confined here ({why}; {CANDIDATE_PROCESS_ENV}=auto)"
    )


def candidate_process_wanted() -> bool:
    """Whether function candidates run in a runner (:func:`candidate_process`)."""
    return candidate_process()[0]


def landlock_wanted() -> bool:
    """Whether a runner confines itself (:data:`LANDLOCK_ENV`)."""
    return switch_on(LANDLOCK_ENV)


def landlock_version() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (nothing is restricted by asking)."""
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    version = syscall(ctypes.c_long(_LANDLOCK_CREATE), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def confine(readable: Iterable[str], writable: Iterable[str]) -> str | None:
    """Limit what this process may open from now on to ``readable`` (and below: read, list, run) and
    ``writable`` (and below: anything), with Landlock; None when in force, else why not (an older
    kernel: the runner then refuses the candidate, unless :data:`LANDLOCK_ENV` is off)."""
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    # The ruleset's attributes: the file rights it handles; from ABI 6 on, also its scope (no network
    # rights): the signals, so that the runner cannot signal its worker (same uid) or anything else
    # outside its domain. Not abstract UNIX sockets (the CUDA driver's IPC may use them).
    attr = (
        struct.pack("=QQQ", _FS_ALL, 0, _SCOPE_SIGNAL)
        if landlock_version() >= 6
        else struct.pack("=Q", _FS_ALL)
    )
    handled = ctypes.create_string_buffer(attr, len(attr))
    ruleset = syscall(
        ctypes.c_long(_LANDLOCK_CREATE), handled, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        return f"Landlock is not available here ({os.strerror(ctypes.get_errno())})"
    try:
        rules = [(p, _FS_READ) for p in readable] + [(p, _FS_ALL) for p in writable]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not here: nothing to allow
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= _FS_FILE
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
                syscall(ctypes.c_long(_LANDLOCK_ADD_RULE), ctypes.c_long(ruleset), 1, rule, 0)
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "no_new_privs could not be set"
        if syscall(ctypes.c_long(_LANDLOCK_RESTRICT), ctypes.c_long(ruleset), 0) != 0:
            return f"Landlock refused the restriction ({os.strerror(ctypes.get_errno())})"
        return None
    finally:
        os.close(ruleset)


# seccomp (Linux 3.17+ for every thread at once): what a runner may no longer start once it loads a
# candidate. A process it forked outlived its kill (review 23b: a helper wrote back an ``in`` array the
# candidate had changed once the runner was gone, racing the worker's last checks); threads die with it.
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_CLONE_THREAD = 0x00010000
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JSET_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
# machine: (seccomp's system call, its audit arch, clone, clone3, the calls refused outright: the
# fork-like ones, then memfd_create and memfd_secret)
_SECCOMP_ABI = {
    "x86_64": (317, 0xC000003E, 56, 435, (57, 58, 59, 322, 319, 447)),  # fork, vfork, execve, execveat
    "aarch64": (277, 0xC00000B7, 220, 435, (221, 281, 279, 447)),  # execve, execveat (no fork, vfork)
}


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def forbid_processes() -> str | None:
    """Refuse, on every thread of this process from now on, every system call that makes a process or
    runs a program: a ``clone`` without ``CLONE_THREAD``, ``fork``, ``vfork``, ``execve``, ``execveat``
    (EPERM), and ``clone3`` (ENOSYS: the C library then makes its threads with ``clone``); and the two
    that make a file in memory, ``memfd_create`` and ``memfd_secret`` (EPERM): a memfd filled and
    unmapped holds host memory that no ``RLIMIT_AS`` and no RSS watch counts, bounded only by a memory
    cgroup, which many hosts do not give the executor (session 40; the runner maps the worker's memfds,
    passed to it, and makes none). Calls of another ABI than the machine's (x86-64's 32-bit
    ``int 0x80``, x32) are refused whole. Needs no-new-privileges (set by the runner at its start). None
    when in force, else why not."""
    machine = platform.machine()
    if machine not in _SECCOMP_ABI:
        return f"no system call filter for {machine}"
    seccomp, arch, clone, clone3, refused = _SECCOMP_ABI[machine]
    eperm, enosys = _SECCOMP_RET_ERRNO | errno.EPERM, _SECCOMP_RET_ERRNO | errno.ENOSYS
    prog = [_bpf(_BPF_LD_W_ABS, 4), _bpf(_BPF_JEQ_K, arch, 1, 0), _bpf(_BPF_RET_K, eperm)]
    prog += [_bpf(_BPF_LD_W_ABS, 0), _bpf(_BPF_JGE_K, 0x40000000, 0, 1), _bpf(_BPF_RET_K, eperm)]
    for number in refused:
        prog += [_bpf(_BPF_JEQ_K, number, 0, 1), _bpf(_BPF_RET_K, eperm)]
    prog += [_bpf(_BPF_JEQ_K, clone3, 0, 1), _bpf(_BPF_RET_K, enosys)]
    # clone (its flags are its first argument: the low word, at offset 16, little-endian): allowed with
    # CLONE_THREAD, else refused; any other call (4 ahead when it is not clone) allowed
    prog += [_bpf(_BPF_JEQ_K, clone, 0, 4), _bpf(_BPF_LD_W_ABS, 16), _bpf(_BPF_JSET_K, _CLONE_THREAD, 0, 1)]
    prog += [
        _bpf(_BPF_RET_K, _SECCOMP_RET_ALLOW),
        _bpf(_BPF_RET_K, eperm),
        _bpf(_BPF_RET_K, _SECCOMP_RET_ALLOW),
    ]
    program = ctypes.create_string_buffer(b"".join(prog))
    fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(program))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(seccomp),
        ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.create_string_buffer(fprog, len(fprog)),
    )
    if result != 0:
        return f"seccomp refused the filter ({os.strerror(ctypes.get_errno()) if result < 0 else f'thread {result}'})"
    return None


def runner_files(runtime: str, product: str) -> tuple[list[str], list[str]]:
    """What a runner may open once it loads a candidate: read the system's libraries and the
    interpreter's (the paths a worker's jail binds), the candidate's library, ``/proc`` and ``/sys``;
    write the null and random devices, and on a GPU its device nodes and ``/dev/shm``. Not the
    executor's cache (the stored timing sets and the reference's outputs), nor the worker's directory
    (its job, the runner's working directory), nor any directory above or below that one."""
    here = Path.cwd().resolve()

    def apart(path: str) -> bool:
        where = Path(path).resolve()
        return where != here and where not in here.parents and here not in where.parents

    readable = [*HOST_PATHS, *(p for p in python_paths(_PACKAGE) if apart(p)), product, "/proc", "/sys"]
    writable = list(DEVICES)
    if runtime == "gpu":
        paths, nodes = gpu_paths()
        readable += [*(p for p in paths if apart(p)), "/etc"]
        writable += [*nodes, "/dev/shm"]  # noqa: S108 - the jail's own, empty
    return readable, writable


def confine_runner(runtime: str, product: str) -> str | None:
    """Confine this process as a runner of ``runtime`` does before it loads ``product``: Landlock
    (:func:`confine`, :func:`runner_files`), then the seccomp filter (:func:`forbid_processes`). None
    when both are in force, else why not."""
    return confine(*runner_files(runtime, product)) or forbid_processes()


def probe() -> int:
    """``python -m executor.worker runner probe``: confine this process as a host runner does before
    its load (:func:`confine_runner`, the interpreter in the candidate library's place) and say on stdout how that
    went: ``confined`` or ``not confined: WHY`` (read by :func:`runner_confinement`)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # as serve does
    why = confine_runner("host", sys.executable)
    sys.stdout.write("confined\n" if why is None else f"not confined: {why}\n")
    sys.stdout.flush()
    return 0


class _Served:
    """What a runner holds: the bound entry, its task, the mappings by key, the CUDA context."""

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        self.gpu: Any = None
        self.task: FunctionTask | KernelTask | None = None
        self.fn: Any = None
        self.maps: dict[int, dict[str, np.ndarray]] = {}

    def handle(self, request: dict[str, Any], fds: list[int]) -> None:
        op = request["op"]
        if op == "start" or (op == "load" and self.runtime == "gpu"):
            if self.runtime == "gpu" and self.gpu is None:
                from executor.worker.gpu import GpuContext

                # No lock here: the worker holds it while it waits for this (Runner.start). Its
                # failure is the reply.
                self.gpu = GpuContext()
            if op == "start":
                return
        if op == "load":
            task = TypeAdapter(Task).validate_python(request["task"])
            # Before the library is loaded: its constructors are the candidate's code too.
            # Unconfined, it could write the worker's result file (review 23b): only when the operator
            # says so, never because Landlock failed.
            if not landlock_wanted():
                logger.warning(
                    "the candidate's process is not confined beyond the worker's jail (no Landlock, no "
                    "seccomp filter): %s is off",
                    LANDLOCK_ENV,
                )
            elif (why := confine_runner(self.runtime, request["product"])) is not None:
                raise CandidateFailed(
                    ErrorKind.RUNTIME_NOT_AVAILABLE,
                    f"the candidate's process could not be confined: {why} ({LANDLOCK_ENV}=0 runs it in the "
                    "worker's jail alone, which lets it write the worker's files)",
                )
            self.fn = bind_entry(ctypes.CDLL(request["product"]), request["symbol"], task)
            self.task = task
        elif op == "unmap":
            self.maps.pop(int(request["key"]), None)
        elif op == "call":
            assert self.task is not None
            if fds:  # its first call on this mapping
                try:
                    # The sealed memfd read-only: the kernel refuses this process a writable mapping.
                    self.maps[int(request["key"])] = view_arrays(fds, request["layout"], (SEALED_PART,))
                finally:
                    for fd in fds:
                        os.close(fd)
            if request.get("flush") and self.gpu is not None:
                self.gpu.flush_l2()
            call_entry(self.fn, self.task, request["scalars"], self.maps[int(request["key"])])
            if self.gpu is not None:
                self.gpu.synchronize()
        elif op == "flush" and self.gpu is not None:
            self.gpu.flush_l2()
        elif op == "reset" and self.gpu is not None:
            self.gpu.reset_timing_state()


def serve(runtime: str) -> NoReturn:
    """The runner's loop (``python -m executor.worker runner candidate {host|gpu}``): one request at a
    time from the worker, each acknowledged with its nonce; ends when the worker is gone (at once:
    pycuda aborts an interpreter that exits with its context still current)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # gone with its worker
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if str(os.getppid()) != os.environ.get(RUNNER_PARENT_ENV, str(os.getppid())):
        os._exit(0)  # the worker died before the signal was set
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sock = socket.socket(fileno=int(os.environ[RUNNER_FD_ENV]))
    if runtime == "gpu":
        _load_driver()
    _serve(sock, _Served(runtime))
    sys.stderr.flush()
    os._exit(0)


def _load_driver() -> None:
    """Load and initialise the CUDA driver ahead, while the worker prepares (its context is made
    later, at the worker's request: Runner.start); a failure is logged and met again then."""
    try:
        import pycuda.driver as cuda

        cuda.init()
    except Exception as e:
        logger.warning("the candidate's process could not load the CUDA driver: %s: %s", type(e).__name__, e)


def _serve(sock: socket.socket, served: _Served) -> None:
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 4)
        except OSError:
            return
        if not message:
            return
        request = json.loads(message)
        nonce = str(request["nonce"])
        try:
            served.handle(request, fds)
            reply = f"ok {nonce}"
        except CandidateFailed as e:
            reply = f"fail {nonce} {e.kind.value} {e}"
        except Exception as e:  # the candidate's library failed to load, a CUDA error, ...
            kind = ErrorKind.CUDA_ERROR.value if type(e).__module__.startswith("pycuda") else "crash"
            reply = f"fail {nonce} {kind} {type(e).__name__}: {e}"
        sock.send(reply.encode()[:REPLY_BYTES])
