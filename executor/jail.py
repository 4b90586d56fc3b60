"""A jail for compiles: the compiler sees the toolchain and the build's own directory, nothing else.

A candidate's source is untrusted, and a compiler reads whatever its preprocessor is pointed at
(``#include </etc/shadow>``, a macro that expands to a path, a directive split by backslash-newlines)
and echoes it in its diagnostics. So nvcc, g++ (task references) and their children run:

- ``namespace`` (Linux, where ``unshare`` works): in new mount, IPC, PID and cgroup namespaces (the
  cgroup one left out, said once in the log, where the kernel refuses it and the others work), and a
  user namespace where the executor is not root, whose root is a fresh tmpfs holding only read-only bind
  mounts of the toolchain (:func:`host_toolchain_paths` plus the CUDA toolkit), the build directory
  (writable), a private /tmp and /proc; as the unprivileged :data:`JAIL_UID` where the executor is
  root. The compiler is PID 1 of its PID namespace: when it or the executor dies (the parent-death
  signal at each step), every process it started dies with it.
- ``uid`` (no namespaces, the executor root): as :data:`JAIL_UID` in its own process group; files
  only root may read stay unreadable, world-readable ones do not. The include check after
  preprocessing (:mod:`executor.compile`) and the log cut (:func:`cut_log`) still apply.
- ``none`` (no namespaces, not root): only the include check and the log cut.

:func:`protection` says which one is in force; it is logged at start and put in every compile log
of a jailed build. The state of the art with namespaces unavailable is weaker; ``/readyz`` and the
executor's ``/v1/info`` name it so that an operator sees it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from executor.errors import EvaluationCancelled

logger = logging.getLogger(__name__)

JAIL_UID = 65534  # nobody
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
_INIT = Path(__file__).with_name("jail_init.py")
# Host paths that a compiler and its assembler and linker need (the dynamic loader, libraries,
# binaries, headers); /etc only for the loader's cache and the alternatives' links.
HOST_PATHS = (
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/include",
    "/usr/local/include",
    "/etc/ld.so.cache",
    "/etc/alternatives",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
Protection = Literal["namespace", "uid", "none"]
# /tmp inside the jail is the jail's own tmpfs, not the host's.
JAIL_TMP = "/tmp"  # noqa: S108


# libc's prctl, looked up here, in the parent: a dlopen in the child between fork and exec (what
# ``ctypes.CDLL`` does) can meet the dynamic loader's state as another thread of the parent left it at the
# fork (an NVRTC compile loading its libraries) and abort there ("Inconsistency detected by ld.so:
# dl-open.c: ... r_state == RT_CONSISTENT", seen once as a failed nvcc compile in session 35's suite).
_PRCTL: Any
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # no libc to ask (not Linux)
    _PRCTL = None


def _pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def child_setup(niceness: int | None, cwd: str, user: int | None) -> None:  # pragma: no cover
    """In the child between fork and exec (plain system calls only): the lowered priority, the
    working directory (entered while still privileged), the unprivileged user, the parent-death
    signal (set after the uid change, which clears it) and no new privileges (no set-uid program
    the command starts gains any)."""
    if niceness is not None:
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    os.chdir(cwd)
    if user is not None:
        os.setgroups([])
        os.setgid(user)
        os.setuid(user)
    _pdeathsig()
    if _PRCTL is not None:
        _PRCTL(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def is_root() -> bool:
    return os.geteuid() == 0


# Whether the jails get a cgroup namespace (``--cgroup``): False only once :func:`protection` has found
# the kernel refusing one while the other namespaces work (review 40b's L-b); set again by each of its
# probes (review 41 L1: a fallback once was a fallback for the process's life, its cache cleared or not).
_cgroup_namespace = True
# What unshare(1) says when the kernel refuses a namespace it does not have (EINVAL): with the probe
# without ``--cgroup`` passing, the cgroup namespace's refusal.
_REFUSED = "Invalid argument"


def cgroup_namespace() -> bool:
    """Whether the namespace jails have a cgroup namespace of their own (probed by :func:`protection`)."""
    protection()
    return _cgroup_namespace


def _unshare_args(cgroup: bool | None = None) -> list[str]:
    """``unshare`` and its options for a namespace jail; ``cgroup``: with ``--cgroup`` (None: where the
    host gives one, :func:`cgroup_namespace`)."""
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    # --ipc: SysV objects and POSIX message queues of the jail's own, gone with its last process
    # (review 25: a candidate's shared-memory segment outlived its worker and its memory limit, and a
    # later evaluation of the same code found every answer in it).
    # --cgroup: a cgroup namespace rooted where the command starts, a worker's own memory cgroup (entered
    # before unshare runs): /proc/self/cgroup shows nothing of the host's tree, and on cgroup v2 (with
    # nsdelegate) the kernel refuses a process of it a move out and writes to its root's limits (review 40 H1).
    args = [unshare, "--mount", "--ipc", "--pid", "--cgroup", "--fork", "--kill-child"]
    if not (cgroup_namespace() if cgroup is None else cgroup):
        args.remove("--cgroup")
    if not is_root():
        args[1:1] = ["--user", "--map-root-user"]
    return args


def _probe(cgroup: bool) -> tuple[int | None, str]:
    """A jailed ``true`` in the namespace jail, with or without a cgroup namespace."""
    with tempfile.TemporaryDirectory(prefix="regraph-jail-probe-") as tmp:
        true = shutil.which("true") or "/bin/true"
        jail = Jail(read_only=(*HOST_PATHS,), cgroup_namespace=cgroup)
        try:
            return jail.run([true], Path(tmp), timeout_s=30.0, forced="namespace")
        except OSError as e:
            return -1, str(e)


# What a jail without a cgroup namespace loses and keeps, said once in the log (review 40b's L-b).
WITHOUT_CGROUP_NAMESPACE = (
    "the namespace jails run without a cgroup namespace (the kernel refused one: %s): a jailed process's "
    "/proc/self/cgroup names its cgroup's path on the host, and on cgroup v2 the kernel's nsdelegate "
    "refusal of a move out of a worker's cgroup (review 40 H1's second guard) is gone; the workers' memory "
    "cgroups stay, guarded by the jailed uid, which owns no file of theirs (checked at the start), and by "
    "the jail's read-only /sys with /sys/fs/cgroup covered"
)


@functools.lru_cache(maxsize=1)
def protection() -> Protection:
    """The strongest protection that works on this host (probed once: a jailed ``true``, again without
    a cgroup namespace where the first is refused; :func:`cgroup_namespace` says which)."""
    global _cgroup_namespace
    _cgroup_namespace = True  # probed again (its cache cleared): nothing kept from an earlier probe
    if os.environ.get("REGRAPH_JAIL", "") == "off":  # only for tests that show what the jail stops
        return "uid" if is_root() else "none"
    if sys.platform.startswith("linux") and Path(_unshare_args(True)[0]).is_file():
        rc, out = _probe(cgroup=True)
        if rc == 0:
            logger.info("compiles run in a mount/PID namespace jail")
            return "namespace"
        # A kernel without cgroup namespaces (before 4.6, or built without them) refuses the whole
        # unshare: the other namespaces are kept where they work without it. Only then: a probe that
        # failed for another reason (its 30 s passed under load, a fork failed) is made again with the
        # cgroup namespace, and it is dropped only when that fails too (review 41 L1).
        again, _ = _probe(cgroup=False)
        if again == 0:
            if _REFUSED not in out:
                third, third_out = _probe(cgroup=True)
                if third == 0:
                    logger.info(
                        "compiles run in a mount/PID namespace jail (its first probe failed: %s)",
                        out.strip()[:300],
                    )
                    return "namespace"
                out = f"{out.strip()}; again: {third_out.strip()}"
            _cgroup_namespace = False
            logger.warning(WITHOUT_CGROUP_NAMESPACE, out.strip()[:300])
            logger.info("compiles run in a mount/PID namespace jail (no cgroup namespace)")
            return "namespace"
        logger.warning("namespaces are unavailable for the compile jail (%s)", out.strip()[:300])
    fallback: Protection = "uid" if is_root() else "none"
    logger.warning(
        "compile jail: %s (no namespaces); files only root can read stay protected"
        if fallback == "uid"
        else "compile jail: %s (no namespaces, not root); only the include check and the log cut apply",
        fallback,
    )
    return fallback


def describe(kind: Protection) -> str:
    """One line for logs and verdicts on what keeps a compile from reading host files."""
    return {
        "namespace": "compiled in a mount-namespace jail (toolchain and build directory only)",
        "uid": f"compiled as uid {JAIL_UID} without namespaces (root-only files protected)",
        "none": "compiled without a jail (no namespaces here); include check and log cut only",
    }[kind]


def _resolved(paths: Iterable[str | Path]) -> list[str]:
    """Each path and, for links, what it points to (both must exist in the jail)."""
    out: list[str] = []
    for p in paths:
        text = os.path.abspath(str(p))
        for form in (text, os.path.realpath(text)):
            if form not in out and os.path.lexists(form):
                out.append(form)
    return out


@functools.lru_cache(maxsize=8)
def compiler_include_dirs(cxx: str) -> tuple[str, ...]:
    """The ``#include <...>`` search list of a host C++ compiler, as it reports it (``-E -v``)."""
    try:
        out = subprocess.run(
            [cxx, "-xc++", "-E", "-v", os.devnull], capture_output=True, text=True, timeout=60, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return ()
    m = re.search(r"search starts here:\n(.*?)End of search list", out, re.S)
    if m is None:
        return ()
    return tuple(
        os.path.normpath(line.strip())
        for line in m.group(1).splitlines()
        if line.startswith(" ") and line.strip()
    )


def host_toolchain_paths(cxx: str | None = None) -> list[str]:
    """Host paths a jailed compile needs: :data:`HOST_PATHS` and the C++ compiler's include dirs."""
    cxx = cxx or shutil.which("g++") or "g++"
    return _resolved([*HOST_PATHS, *compiler_include_dirs(cxx)])


# Where the CUDA driver, the toolkit's libraries and an NVIDIA container runtime's files live; the
# runtime jail binds those that exist (read-only), with the devices below.
CUDA_PATHS = (
    "/usr/local/cuda",
    "/usr/local/nvidia",
    "/usr/local/lib",
    "/usr/local/bin",
    "/usr/share/nvidia",
    "/etc/nvidia",
    "/run/nvidia-persistenced",
    "/sys",
)
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
# Shallow directories never bound whole because a job named something inside them.
_TOO_WIDE = frozenset(
    {"/", "/tmp", "/var", "/var/tmp", "/root", "/home", "/etc", "/usr", "/opt", "/run", "/srv", "/mnt"}  # noqa: S108
)


def wide(path: str | Path) -> bool:
    """Whether ``path`` is too wide a directory to bind whole for a job (``/``, ``/tmp``, ``/root``...)."""
    text = os.path.normpath(os.path.abspath(str(path)))
    return text in _TOO_WIDE or text.count("/") < 2


def _mapped_library_dirs() -> list[str]:
    """The directories of the shared libraries this process has loaded (the interpreter's, numpy's,
    the CUDA driver's where it is loaded here)."""
    dirs: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
                d = os.path.dirname(parts[5])
                if d not in dirs and not wide(d):
                    dirs.append(d)
    return dirs


def python_paths(project_package: str | Path) -> list[str]:
    """What a ``python -m`` of this interpreter needs: its prefixes, its import path except the
    project's checkout (of which only ``project_package`` is bound), and the libraries it loaded."""
    package = Path(project_package).resolve()
    project = package.parent
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    for entry in sys.path:
        if not entry or not os.path.exists(entry):
            continue
        resolved = Path(entry).resolve()
        if resolved == project or resolved in project.parents or wide(resolved):
            continue
        paths.append(entry)
    return [p for p in dict.fromkeys([*paths, str(package), *_mapped_library_dirs()]) if not wide(p)]


def gpu_paths() -> tuple[list[str], list[str]]:
    """The read-only paths and the device nodes that the CUDA driver needs in a jail: the toolkit and
    driver directories that exist here (:data:`CUDA_PATHS`, ``$CUDA_HOME``, ``$LD_LIBRARY_PATH``)
    and every ``/dev/nvidia*``."""
    paths = [*CUDA_PATHS]
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            paths.append(os.environ[env])
    paths += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p and not wide(p)]
    devices = sorted({*GPU_DEVICES, *(str(p) for p in Path("/dev").glob("nvidia[0-9]*"))})
    if Path("/dev/nvidia-caps").is_dir():
        devices.append("/dev/nvidia-caps")
    return [p for p in paths if os.path.exists(p)], [d for d in devices if os.path.exists(d)]


@dataclass
class Jail:
    """What a jailed command may see: read-only paths, writable paths (the build directory is added
    by :meth:`run`) and device nodes."""

    read_only: Sequence[str | Path] = ()
    writable: Sequence[str | Path] = ()
    devices: Sequence[str] = DEVICES
    env: dict[str, str] = field(default_factory=dict)
    # Empty tmpfs mounts of the jail's own (``/dev/shm``), and paths that must exist: the jail fails
    # (status 125, ``jail:`` on stderr) rather than run without one of them.
    tmpfs: Sequence[str] = ()
    required: Sequence[str] = ()
    # Keep a small init as PID 1 of the namespace and run the command as its child (see jail_init).
    init: bool = False
    # With a cgroup namespace of its own (None: where the host gives one; protection's probe sets it).
    cgroup_namespace: bool | None = None

    def _spec(self, root: Path, cwd: Path) -> dict[str, object]:
        env = {"PATH": "/usr/bin:/bin", "HOME": JAIL_TMP, "TMPDIR": JAIL_TMP, "LANG": "C", **self.env}
        return {
            "root": str(root),
            "cwd": str(cwd),
            "read_only": _resolved([*self.read_only, *self.required]),
            "writable": _resolved([*self.writable, cwd]),
            "devices": [d for d in self.devices if os.path.exists(d)],
            "tmpfs": list(self.tmpfs),
            "required": [os.path.abspath(str(p)) for p in self.required],
            "init": self.init,
            # SysV IPC's limits lowered (jail_init.IPC_LIMITS), only where the jail has an IPC namespace
            # of its own: written in the host's, they would be the host's.
            "ipc_limits": "--ipc" in _unshare_args(self.cgroup_namespace),
            "uid": JAIL_UID if is_root() else None,
            # In the executor's user namespace (not root): the jail's mounts locked against the command,
            # which runs as that namespace's root (jail_init._lock_mounts); as root, the command's uid
            # (JAIL_UID) may remount nothing.
            "lock_mounts": not is_root(),
            "env": env,
        }

    def command(
        self, cmd: list[str], cwd: Path, root: Path, kind: Protection
    ) -> tuple[list[str], dict[str, str], int | None]:
        """How to start ``cmd`` in ``cwd`` under ``kind``: ``(argv, env, user)``, ``user`` the uid
        that :func:`child_setup` must switch to (``uid``), or None. ``root`` is an empty directory
        that the jail's root is mounted on (``namespace``); it must stay until the command is gone."""
        if kind == "namespace":
            spec = json.dumps(self._spec(root, cwd))
            argv = [
                *_unshare_args(self.cgroup_namespace),
                sys.executable,
                "-I",
                "-S",
                str(_INIT),
                spec,
                "--",
                *cmd,
            ]
            return argv, {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"}, None
        return list(cmd), {**os.environ, **self.env}, JAIL_UID if kind == "uid" else None

    def run(
        self,
        cmd: list[str],
        cwd: Path,
        timeout_s: float,
        nice: int = 0,
        forced: Protection | None = None,
        stop: StopSignal | None = None,
    ) -> tuple[int | None, str]:
        """Run ``cmd`` in ``cwd`` under the protection in force; return ``(returncode, output)``
        (stdout and stderr together), ``returncode`` None after a timeout (the whole process tree is
        killed). ``cwd`` is the build directory: the only place the command may write. Once ``stop``
        is set (the service shuts down, or the evaluation the command builds for was given up), the
        process tree is killed and :class:`EvaluationCancelled` raised."""
        kind = forced or protection()
        if is_root():
            # The unprivileged compiler writes its products here (and only here).
            with contextlib.suppress(OSError):
                os.chown(cwd, JAIL_UID, JAIL_UID)
                for child in cwd.iterdir():
                    os.chown(child, JAIL_UID, JAIL_UID)
        with tempfile.TemporaryDirectory(prefix="regraph-jail-") as root_dir:
            argv, env, user = self.command(cmd, cwd, Path(root_dir), kind)
            return _run_group(argv, cwd, timeout_s, nice, env, user, stop)


class StopSignal(Protocol):
    """What a command run with ``stop`` looks at: a :class:`threading.Event`, or :class:`AnyOf` several."""

    def is_set(self) -> bool: ...


class AnyOf:
    """Set once any of its events is: an evaluation's compile stops when its caller goes away or when the
    executor stops, whichever comes first."""

    def __init__(self, *events: threading.Event | None) -> None:
        self.events = tuple(e for e in events if e is not None)

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


# How often a command run with a ``stop`` event looks at it.
STOP_POLL_S = 0.1
# What a command stopped by its ``stop`` raises.
STOPPED = "the command was stopped: its evaluation was given up or the service is stopping"


def _run_group(
    argv: list[str],
    cwd: Path,
    timeout_s: float,
    nice: int,
    env: dict[str, str],
    user: int | None,
    stop: StopSignal | None = None,
) -> tuple[int | None, str]:
    """Run in its own process group with the parent-death signal; kill the group on timeout, or once
    ``stop`` is set (then raise :class:`EvaluationCancelled`)."""
    # The lowered priority is set in the child before it enters the build directory and before exec,
    # so no process of the build ever runs (or is seen) at the executor's own priority.
    target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice) if nice > 0 else None
    if stop is not None and stop.is_set():  # given up while it waited to start: nothing is started
        raise EvaluationCancelled(STOPPED)
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
        preexec_fn=functools.partial(child_setup, target, str(cwd), user),
    )
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            try:
                # Without a stop event, one wait for the whole limit; with one, short waits (a wait
                # cut by its timeout keeps what was read, and the next one goes on from there).
                out, _ = proc.communicate(timeout=max(0.0, left if stop is None else min(left, STOP_POLL_S)))
                return proc.returncode, out
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                if stop is not None and stop.is_set():
                    raise EvaluationCancelled(STOPPED) from None
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    except BaseException:
        # Stopped, or the waiting thread interrupted (service shutdown): nothing keeps compiling. The
        # group is reaped before the caller removes the build directory and the jail's root, so that
        # no dying process of it writes there meanwhile (review 35 L2).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.communicate(timeout=5)
        raise


def cut_log(log: str, own: Iterable[str], work: Path | None = None, limit: int = 20_000) -> str:
    """A compiler log cut to the candidate's own files.

    ``work/`` is removed from paths. A diagnostic located in any other file (``/etc/x(1): error``,
    ``x.h:3:1: error``) is removed with the lines that follow it up to the next diagnostic (the source
    line a compiler echoes, which would be that file's text); a marker says how many lines went.
    Diagnostics in the candidate's own files, and lines with no location, stay.
    """
    names = set(own)
    text = log.replace(str(work) + "/", "") if work is not None else log
    out: list[str] = []
    hidden = 0
    hiding = False
    for line in text.splitlines():
        located = _LOCATION.match(line)
        if located is not None:
            hiding = located.group(1) not in names
        elif hiding and (not line.strip() or _BOUNDARY.match(line)):
            hiding = False
        if hiding:
            hidden += 1
            continue
        if hidden:
            out.append(f"[{hidden} line(s) about other files removed]")
            hidden = 0
        out.append(line)
    if hidden:
        out.append(f"[{hidden} line(s) about other files removed]")
    return "\n".join(out)[-limit:]


# A diagnostic's location at the start of a line: EDG's ``file(12): `` or GCC's ``file:12:3: ``.
_LOCATION = re.compile(r"^(\S+?)(?:\((\d+)\)|:(\d+)(?::\d+)?):\s")
# Lines that end an echoed excerpt without being a diagnostic themselves.
_BOUNDARY = re.compile(
    r"^(?:In file included from|compilation terminated|\d+ (?:catastrophic )?errors? detected)"
)
