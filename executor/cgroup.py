"""A memory cgroup per worker: host memory that no process of the worker maps still counts.

``RLIMIT_AS`` (the host path) and the parent's watch of resident memory (the GPU path,
:func:`executor.sandbox._tree_rss_bytes`) see only what a process maps. A candidate can hold more
without mapping it: the pages of a ``memfd`` it filled and unmapped (the descriptor kept), files written
to its jail's tmpfs (``/tmp``, ``/dev/shm``), SysV segments (capped since session 38 by the jail's IPC
limits). The kernel charges those pages to the memory cgroup of the task that faulted them in, so a
cgroup of its own per worker, with a limit, bounds them all: past the limit the kernel reclaims what it
can and then kills a process of the cgroup (on cgroup v2, all of them: ``memory.oom.group``).

:func:`find_place` looks once for a directory where the executor may make such cgroups:

- cgroup v1: the executor's own cgroup in the memory hierarchy (children may sit beside processes);
- cgroup v2: only the executor's own cgroup, and only where it is delegated to the executor (systemd's
  ``trusted.delegate`` or ``user.delegate`` extended attribute, a unit with ``Delegate=yes``; or the root
  of its cgroup namespace, a container's own cgroup): there where memory is already enabled for its
  children; else, where the executor is the only process of it, the executor moves itself into a leaf of
  it (``regraph-executor``: the rule of no internal processes) and enables memory for its children. A
  cgroup that is not delegated is another's to manage (systemd's, a device agent's): no cgroup is made
  there, nor in any ancestor, whose workers would escape the executor's own pids, CPU and IO limits;
- ``REGRAPH_EXECUTOR_MEMORY_CGROUPS`` names such a directory itself, or turns them ``off``.

Only an executor that is root, whose workers are jailed, makes them (review 40 H1): a worker's code then
runs as an unprivileged uid (:data:`executor.jail.JAIL_UID`, or a worker uid of its own) that may write
no file of any cgroup, which is checked on the first cgroup made. An executor that is not root runs its
workers' code as its own uid (the user namespace's mapped root): that uid owns the cgroups it makes, and
the code could raise its own limit, leave its cgroup for its parent, or kill another worker's; so there
are none. Inside the jail ``/sys`` is read-only all the way down, ``/sys/fs/cgroup`` covered by an empty
tmpfs (:mod:`executor.jail_init`), and the worker has a cgroup namespace rooted at its own cgroup
(``unshare --cgroup``) where the kernel gives one (:func:`executor.jail.cgroup_namespace`; where it does
not, the cgroups stay: the uid that owns none of their files is the first guard, checked here).

Where none is usable (not root, unjailed workers, nothing delegated, a read-only cgroupfs, no memory
controller) the workers run as before and :attr:`Placement.says` tells why (``GET /v1/device``'s
``memory_cgroups``). Where the pids controller is enabled too, each worker's cgroup gets ``pids.max``
(:data:`PIDS_MAX`): a fork bomb stays in its cgroup.

A worker enters its cgroup between fork and exec (:func:`enter`, through a descriptor that the
executor opened), so nothing it starts is ever outside it; its limit is written before its job is sent
(:meth:`WorkerCgroup.limit`); what it used is read for its verdict (:meth:`WorkerCgroup.memory`); the
cgroup is emptied (``cgroup.kill`` on v2, SIGKILL to each process otherwise) and removed with the
worker (:meth:`WorkerCgroup.remove`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import logging
import os
import secrets
import shutil
import signal
import stat
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from executor.errors import ExecutorError
from executor.jail import is_root

logger = logging.getLogger(__name__)

# The executor's setting (ExecutorSettings.memory_cgroups): "auto", "off", or a cgroup directory.
OFF_VALUES = frozenset({"0", "off", "false", "no"})
# The workers' cgroups are named PREFIX<pid namespace inode>-<executor pid>-<token>-<n> (the token a
# random one per executor process: a pid of another namespace, or reused, names another executor's);
# the executor's own leaf on cgroup v2.
PREFIX = "regraph-worker-"
EXECUTOR_LEAF = "regraph-executor"
# Above the job's memory_limit_bytes: the jail's own processes (``unshare`` and its small Python init,
# about 10 MB resident), and the kernel's memory for the worker's page tables, sockets and files, which
# a cgroup counts and the RSS watch does not. Page cache charged to the cgroup is reclaimed before any
# process is killed.
HEADROOM_BYTES = 64 << 20
# How long the removal of a worker's cgroup waits for its last processes to exit.
REMOVE_WAIT_S = 10.0


# pids.max of a worker's cgroup where the pids controller is enabled for it (threads count: a CUDA
# context, OpenBLAS's and torch's pools, an OpenMP candidate's team: one per core each, in the worker and
# in its runner); ExecutorSettings.memory_cgroup_pids sets it. 1024, or 8 per core where that is more
# (review 40b's L-d: a fixed 1024 could refuse an honest candidate on a host of ~300 cores or more).
def default_pids_max(cores: int | None = None) -> int:
    """The default ``pids.max``: 1024, or 8 tasks per core of the host where that is more."""
    return max(1024, 8 * (cores if cores is not None else os.cpu_count() or 1))


PIDS_MAX = default_pids_max()
PROC_CGROUP = Path("/proc/self/cgroup")
MOUNTINFO = Path("/proc/self/mountinfo")

Version = Literal[1, 2]


class CgroupError(ExecutorError):
    """A cgroup of the workers could not be made, limited, entered or read."""


@dataclass(frozen=True)
class CgroupPlace:
    """Where workers' memory cgroups are made: ``parent`` (a directory of the cgroup ``version``)."""

    version: Version
    parent: Path
    how: str  # how it was found, for the executor's log and GET /v1/device
    pids_max: int = PIDS_MAX  # written where the pids controller is enabled for the workers' cgroups

    def describe(self) -> str:
        """One line on what bounds a worker's memory here."""
        return (
            f"each worker in a memory cgroup of its own (cgroup v{self.version}, under {self.parent}: "
            f"{self.how}), limited to the memory limit plus {HEADROOM_BYTES >> 20} MiB, tmpfs, memfd "
            "and SysV pages counted"
        )


@dataclass(frozen=True)
class Placement:
    """What :func:`find_place` found: a place, or None and why not (``says``, either way)."""

    place: CgroupPlace | None
    says: str


@dataclass(frozen=True)
class CgroupMemory:
    """What a worker's cgroup recorded: its peak (bytes; None where the kernel keeps none: cgroup v2
    before Linux 5.19), how many times it was out of memory at its limit (``ooms``: v2's ``oom``
    events, v1's ``under_oom`` now) and how many of its processes the kernel's OOM killer killed
    (``oom_kills``: at its limit, or, rarely, the host's or an ancestor's: refused as well, the candidate's
    memory being among what was short)."""

    peak: int | None
    ooms: int
    oom_kills: int

    @property
    def exceeded(self) -> bool:
        """Whether the worker met its limit with nothing left to reclaim, or lost a process to the OOM
        killer."""
        return self.ooms > 0 or self.oom_kills > 0

    def describe(self) -> str:
        """Its figures, for a verdict's message."""
        peak = f"peak {self.peak >> 20} MiB, " if self.peak is not None else ""
        return f"{peak}{self.oom_kills} process(es) killed by the kernel's OOM killer"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise CgroupError(f"cannot read {path}: {e.strerror or e}") from e


def _write(path: Path, value: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        raise CgroupError(f"cannot open {path}: {e.strerror or e}") from e
    try:
        os.write(fd, value.encode())
    except OSError as e:
        raise CgroupError(f"cannot write {value!r} to {path}: {e.strerror or e}") from e
    finally:
        os.close(fd)


def _keyed(text: str) -> dict[str, int]:
    """``name value`` lines (``memory.events``, ``memory.oom_control``) as a dict."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[name] = int(value)
    return out


def _procs(directory: Path) -> list[int]:
    try:
        # never 0 (os.kill(0, ...) is this process's own group): the kernel lists none, a fake tree might
        return [pid for pid in map(int, (directory / "cgroup.procs").read_text().split()) if pid > 0]
    except (OSError, ValueError):
        return []


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK) and os.access(directory / "cgroup.procs", os.W_OK)


def _mounts(mountinfo: Path) -> list[tuple[str, str, str, set[str]]]:
    """The cgroup mounts: (root in the hierarchy, mount point, file system type, super options)."""
    found = []
    with contextlib.suppress(OSError):
        for line in mountinfo.read_text().splitlines():
            head, _, tail = line.partition(" - ")
            fields, rest = head.split(), tail.split()
            if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], rest[0], set(rest[2].split(","))))
    return found


def _under(mount_root: str, mount_point: str, path: str) -> Path | None:
    """Where the cgroup ``path`` (as /proc/self/cgroup says it) is in a mount of its hierarchy whose
    root is ``mount_root``; None when the mount does not show it."""
    if mount_root != "/" and path != mount_root and not path.startswith(mount_root.rstrip("/") + "/"):
        return None
    rest = path[len(mount_root) :] if mount_root != "/" else path
    return Path(mount_point) / rest.lstrip("/")


def _own_cgroups(proc_cgroup: Path, mountinfo: Path) -> tuple[Path | None, Path | None, Path | None, str]:
    """This process's memory cgroup directory on v1, its cgroup v2 directory and v2's mount point
    (each None where there is none to be seen), and what was missing."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError as e:
        return None, None, None, f"cannot read {proc_cgroup}: {e.strerror or e}"
    mounts = _mounts(mountinfo)
    v1 = v2 = v2_mount = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "" and path:
            for root, point, fstype, _ in mounts:
                if fstype == "cgroup2" and (where := _under(root, point, path)) is not None:
                    v2, v2_mount = where, Path(point)
                    break
        elif "memory" in controllers.split(","):
            for root, point, fstype, options in mounts:
                if (
                    fstype == "cgroup"
                    and "memory" in options
                    and (where := _under(root, point, path)) is not None
                ):
                    v1 = where
                    break
    return v1, v2, v2_mount, "no cgroup file system with the memory controller is mounted here"


def _v2_controllers(directory: Path, name: str) -> set[str]:
    with contextlib.suppress(OSError):
        return set((directory / name).read_text().split())
    return set()


DELEGATE_XATTRS = ("trusted.delegate", "user.delegate")
CGROUP_NAMESPACE = Path("/proc/self/ns/cgroup")
# The inode of the host's own cgroup namespace (the kernel's PROC_CGROUP_INIT_INO), whose root is the
# real root cgroup.
INITIAL_CGROUP_NAMESPACE = 0xEFFFFFFB


def _delegated(own: Path, mount: Path, cgroup_ns: Path = CGROUP_NAMESPACE) -> str | None:
    """How the cgroup v2 directory ``own`` is delegated to the executor (systemd's extended attribute
    on a unit with ``Delegate=yes``, or the root of its cgroup namespace), or None. ``cgroup_ns``: the
    executor's cgroup namespace. The root of the host's own cgroup namespace (or of a kernel without
    cgroup namespaces) is the real root cgroup, the host's to manage: never delegated (review 40b's L-e:
    before, a process there was taken as delegated)."""
    if own == mount:
        try:
            namespace = os.stat(cgroup_ns).st_ino
        except OSError:  # no cgroup namespaces: its root is the host's
            namespace = INITIAL_CGROUP_NAMESPACE
        if namespace != INITIAL_CGROUP_NAMESPACE:
            return "the root of its cgroup namespace"
    for name in DELEGATE_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(own, name).strip(b"\0").strip() in (b"1", b"yes", b"true"):
                return f"delegated to it ({name})"
    return None


def _v2_place(own: Path, mount: Path, cgroup_ns: Path = CGROUP_NAMESPACE) -> CgroupPlace | str:
    """The executor's own cgroup v2 directory where it is delegated to the executor and its children may
    have the memory controller; or why not. ``cgroup_ns``: the executor's cgroup namespace."""
    if "memory" not in _v2_controllers(mount, "cgroup.controllers"):
        return f"cgroup v2 at {mount} has no memory controller (it may be bound to a v1 hierarchy)"
    how = _delegated(own, mount, cgroup_ns)
    if how is None:
        return (
            f"cgroup v2: the executor's cgroup {own} is not delegated to it (no {' or '.join(DELEGATE_XATTRS)}, "
            "not the root of a cgroup namespace of its own): it is another's to manage; "
            "REGRAPH_EXECUTOR_MEMORY_CGROUPS may name a directory for them"
        )
    if "memory" in _v2_controllers(own, "cgroup.subtree_control") and _writable(own):
        return CgroupPlace(2, own, f"the executor's own cgroup, {how}")
    others = [pid for pid in _procs(own) if pid != os.getpid()]
    if "memory" in _v2_controllers(own, "cgroup.controllers") and _writable(own) and not others:
        # The executor alone in it: it moves itself into a leaf (no internal processes).
        leaf = own / EXECUTOR_LEAF
        try:
            with contextlib.suppress(FileExistsError):
                leaf.mkdir()
            _write(leaf / "cgroup.procs", str(os.getpid()))
            _write(own / "cgroup.subtree_control", "+memory")
        except (OSError, CgroupError) as e:
            logger.warning("could not make %s the executor's own leaf: %s", leaf, e)
        else:
            with contextlib.suppress(CgroupError):  # best effort: pids.max where it can be had
                _write(own / "cgroup.subtree_control", "+pids")
            return CgroupPlace(
                2, own, f"the executor's own cgroup, {how}; it moved itself to {EXECUTOR_LEAF}"
            )
    held = f" and {len(others)} other process(es) are in it" if others else ""
    return (
        f"cgroup v2: the executor's cgroup {own} ({how}) does not enable memory for its children{held}, "
        "or is not writable by the executor"
    )


def _check(place: CgroupPlace) -> None:
    """Make a cgroup there, limit it, run a process in it and remove it: what every worker needs."""
    probe = WorkerCgroup.make(place)
    try:
        probe.limit(256 << 20)
        true = shutil.which("true") or "/bin/true"
        fd = probe.open_procs()
        try:
            subprocess.run([true], preexec_fn=lambda: enter(fd), check=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            raise CgroupError(f"a process could not enter {probe.path}: {e}") from e
        finally:
            os.close(fd)
        probe.memory()
        exposed = _exposed(probe)
        if exposed is not None:
            raise CgroupError(exposed)
    finally:
        if not probe.remove():
            raise CgroupError(f"could not remove {probe.path}")


def _exposed(probe: WorkerCgroup) -> str | None:
    """Why a worker's code could write its cgroup's files (its limit, its membership, its parent's) though
    it runs as another uid than the executor: a file not the executor's, or one others may write."""
    place = probe.place
    limit = "memory.max" if place.version == 2 else "memory.limit_in_bytes"
    paths = [
        probe.path,
        probe.path / limit,
        probe.path / "cgroup.procs",
        place.parent,
        place.parent / "cgroup.procs",
    ]
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if info.st_uid != os.geteuid():
            return f"{path} belongs to uid {info.st_uid}, not the executor: a worker's code may write it"
        if info.st_mode & stat.S_IWOTH or (info.st_mode & stat.S_IWGRP and info.st_gid != os.getegid()):
            return f"{path} is writable by others than the executor (mode {stat.filemode(info.st_mode)})"
    return None


def _pid_namespace() -> int:
    """The inode of this process's pid namespace (0 where it cannot be read): a pid means a process
    only within it."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


_TOKEN = secrets.token_hex(4)


def _name_prefix() -> str:
    """This executor's workers' cgroups' names, up to their number."""
    return f"{PREFIX}{_pid_namespace()}-{os.getpid()}-{_TOKEN}-"


# The inode of the host's own pid namespace (the kernel's PROC_PID_INIT_INO): from there every process
# of every namespace is in sight.
INITIAL_PID_NAMESPACE = 0xEFFFFFFC
PROC = Path("/proc")


def _owner(name: str) -> tuple[int | None, int, str | None] | None:
    """A worker cgroup's name as (pid namespace, executor pid, token): ``PREFIX<ns>-<pid>-<token>-<n>``, or
    session 39's first form ``PREFIX<pid>-<n>`` (namespace and token unknown: None); None for another."""
    parts = name[len(PREFIX) :].split("-")
    if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit() and parts[3].isdigit():
        return int(parts[0]), int(parts[1]), parts[2]
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        return None, int(parts[0]), None
    return None


def _own_pids(proc: Path = PROC) -> dict[int, list[Path]] | None:
    """Every process in sight by its pid in its own (innermost) pid namespace (``NSpid``'s last), this
    one left out; None where a process's could not be read (nothing can then be ruled out)."""
    table: dict[int, list[Path]] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                status = (entry / "status").read_text()
            except (FileNotFoundError, ProcessLookupError):  # gone meanwhile
                continue
            except OSError:
                return None
            nspid = [line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")]
            if not nspid or not nspid[0] or not nspid[0][-1].isdigit():  # a kernel before 4.1
                return None
            table.setdefault(int(nspid[0][-1]), []).append(entry)
    return table


def _may_run(namespace: int | None, pid: int, table: dict[int, list[Path]] | None) -> bool:
    """Whether some process in sight is ``pid`` of pid namespace ``namespace`` (None: of any), as far as
    can be told (an unreadable one counts as it)."""
    if table is None:
        return True
    for entry in table.get(pid, []):
        if namespace is None:
            return True
        try:
            if os.stat(entry / "ns" / "pid").st_ino == namespace:
                return True
        except (FileNotFoundError, ProcessLookupError):
            continue
        except OSError:
            return True
    return False


def _remove_stale(place: CgroupPlace, proc: Path = PROC) -> None:
    """Remove the empty worker cgroups that an executor no longer running left there (one that had this
    process's pid included). Of this pid namespace: its pid is not running. Of another namespace, or an
    old name (``PREFIX<pid>-<n>``, whose namespace is unknown): only from the host's own pid namespace,
    where every process of every namespace is in sight, and where no process is that pid in that namespace
    (in any, for an old name): a live executor's cgroup in another namespace is never removed (review 40
    L2), and from inside a namespace those of others stay (review 40b's L-f: before, old names and other
    namespaces' were never removed)."""
    namespace = _pid_namespace()
    table: dict[int, list[Path]] | None = None
    scanned = False
    with contextlib.suppress(OSError):
        for child in place.parent.iterdir():
            if not child.name.startswith(PREFIX) or not child.is_dir():
                continue
            owned = _owner(child.name)
            if owned is None or owned[2] == _TOKEN:
                continue
            where, owner, _ = owned
            if where == namespace:
                if owner != os.getpid() and _alive(owner):
                    continue
            elif namespace != INITIAL_PID_NAMESPACE:
                continue  # another namespace's executor may run out of this one's sight
            else:
                if not scanned:
                    table, scanned = _own_pids(proc), True
                if _may_run(where, owner, table):
                    continue
            if not _procs(child):
                with contextlib.suppress(OSError):
                    child.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_place(
    setting: str = "auto",
    proc_cgroup: Path = PROC_CGROUP,
    mountinfo: Path = MOUNTINFO,
    *,
    jailed: bool = True,
    pids_max: int = PIDS_MAX,
) -> Placement:
    """Where this executor makes its workers' memory cgroups (``setting``: ``auto``, ``off``, or a
    cgroup directory), checked by making one and running a process in it; or why nowhere. ``jailed``:
    whether its workers run jailed (as another uid than root); ``pids_max``: each cgroup's ``pids.max``."""
    value = setting.strip()
    if value.lower() in OFF_VALUES:
        return Placement(None, "off: REGRAPH_EXECUTOR_MEMORY_CGROUPS=off")
    if not is_root():
        return Placement(
            None,
            "off: the executor is not root, so its workers' code runs as its own uid (the jail's mapped "
            "root), which may write the cgroups it makes: a candidate could raise its own limit or leave "
            "its cgroup",
        )
    if not jailed:
        return Placement(
            None,
            "off: the workers are not jailed (REGRAPH_JAIL_WORKERS), so a candidate runs as root, which "
            "may write its own cgroup",
        )
    if value.lower() != "auto":
        directory = Path(value)
        if (directory / "cgroup.controllers").exists():
            version: Version = 2
            if "memory" not in _v2_controllers(directory, "cgroup.subtree_control"):
                with contextlib.suppress(CgroupError):
                    _write(directory / "cgroup.subtree_control", "+memory")
            if "memory" not in _v2_controllers(directory, "cgroup.subtree_control"):
                return Placement(None, f"off: {directory} does not enable memory for its children")
        elif (directory / "memory.limit_in_bytes").exists():
            version = 1
        else:
            return Placement(None, f"off: {directory} is no cgroup directory with the memory controller")
        found: CgroupPlace | str = CgroupPlace(version, directory, "named by REGRAPH_EXECUTOR_MEMORY_CGROUPS")
        if version == 2:
            with contextlib.suppress(CgroupError):  # best effort: pids.max where it can be had
                _write(directory / "cgroup.subtree_control", "+pids")
    else:
        v1, v2, v2_mount, missing = _own_cgroups(proc_cgroup, mountinfo)
        if v1 is not None:
            found = (
                CgroupPlace(1, v1, "the executor's own cgroup")
                if _writable(v1)
                else f"cgroup v1: {v1} is not writable"
            )
        elif v2 is not None and v2_mount is not None:
            found = _v2_place(v2, v2_mount)
        else:
            found = missing
    if isinstance(found, str):
        return Placement(None, f"off: {found}")
    found = dataclasses.replace(found, pids_max=pids_max)
    try:
        _remove_stale(found)
        _check(found)
    except CgroupError as e:
        return Placement(None, f"off: {e}")
    return Placement(found, found.describe())


_placements: dict[str, Placement] = {}
_placements_lock = threading.Lock()


def placement(setting: str = "auto", *, jailed: bool = True, pids_max: int = PIDS_MAX) -> Placement:
    """:func:`find_place` for ``setting``, found once per process (logged then). Called before the
    executor starts any thread or process of its own (review 40 M1): on cgroup v2 it may move the
    executor into a leaf, which a process of it beside it would stop."""
    key = f"{setting}|{jailed}|{pids_max}"
    with _placements_lock:
        if key not in _placements:
            found = find_place(setting, jailed=jailed, pids_max=pids_max)
            level = (
                logging.INFO if found.place is not None or setting.lower() in OFF_VALUES else logging.WARNING
            )
            logger.log(level, "workers' memory cgroups: %s", found.says)
            _placements[key] = found
        return _placements[key]


def enter(procs_fd: int) -> None:  # pragma: no cover - runs in the child between fork and exec
    """Move the calling process into the cgroup whose ``cgroup.procs`` ``procs_fd`` is (opened by the
    parent: plain system calls only here). Raises OSError when the kernel refuses."""
    os.write(procs_fd, b"0")


_serial = itertools.count(1)


class WorkerCgroup:
    """One worker's memory cgroup (:meth:`make`), its limit, its figures and its removal."""

    def __init__(self, place: CgroupPlace, path: Path) -> None:
        self.place = place
        self.path = path
        self.limit_bytes: int | None = None

    @classmethod
    def make(cls, place: CgroupPlace) -> WorkerCgroup:
        """A new, empty cgroup under ``place`` (no limit yet); on cgroup v2 the whole cgroup is killed
        when the kernel kills one of its processes at the limit, and nothing of it is swapped."""
        for _ in range(100):  # a name left by an earlier executor (L1): the next number
            path = place.parent / f"{_name_prefix()}{next(_serial)}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
            except OSError as e:
                raise CgroupError(f"cannot make {path}: {e.strerror or e}") from e
        else:
            raise CgroupError(f"cannot make a cgroup under {place.parent}: every name taken")
        made = cls(place, path)
        if place.version == 2:
            with contextlib.suppress(CgroupError):  # the kernel may have no such file (before 4.19)
                _write(path / "memory.oom.group", "1")
            if (path / "pids.max").exists():
                try:
                    _write(path / "pids.max", str(place.pids_max))
                except CgroupError:
                    made.remove()
                    raise
        return made

    def open_procs(self) -> int:
        """A descriptor of its ``cgroup.procs`` for :func:`enter` (the caller closes it)."""
        try:
            return os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError as e:
            raise CgroupError(f"cannot open {self.path}/cgroup.procs: {e.strerror or e}") from e

    def limit(self, limit_bytes: int) -> None:
        """Limit it to ``limit_bytes`` of memory, and as much with swap where swap is counted."""
        text = str(limit_bytes)
        if self.place.version == 2:
            _write(self.path / "memory.max", text)
            if (self.path / "memory.swap.max").exists():
                _write(self.path / "memory.swap.max", "0")
        else:
            memsw = self.path / "memory.memsw.limit_in_bytes"
            raise_first = memsw.exists() and self.limit_bytes is not None and limit_bytes > self.limit_bytes
            if raise_first:  # memory+swap must never be set below memory alone
                _write(memsw, text)
            _write(self.path / "memory.limit_in_bytes", text)
            if memsw.exists() and not raise_first:
                _write(memsw, text)
        self.limit_bytes = limit_bytes

    def memory(self) -> CgroupMemory:
        """What it recorded so far."""
        if self.place.version == 2:
            events = _keyed(_read(self.path / "memory.events"))
            peak: int | None = None
            with contextlib.suppress(CgroupError, ValueError):
                peak = int(_read(self.path / "memory.peak"))
            kills = events.get("oom_kill", 0) + events.get("oom_group_kill", 0)
            return CgroupMemory(peak, events.get("oom", 0), kills)
        control = _keyed(_read(self.path / "memory.oom_control"))
        try:
            peak = int(_read(self.path / "memory.max_usage_in_bytes"))
        except ValueError:
            peak = None
        return CgroupMemory(peak, control.get("under_oom", 0), control.get("oom_kill", 0))

    def processes(self) -> list[int]:
        """The processes in it now."""
        return _procs(self.path)

    def remove(self, timeout_s: float = REMOVE_WAIT_S) -> bool:
        """Kill whatever is left in it and remove it; False (logged) when it is still there after
        ``timeout_s``."""
        kill = self.path / "cgroup.kill"
        if self.place.version == 2 and kill.exists():
            with contextlib.suppress(CgroupError):
                _write(kill, "1")
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.processes()
            if not left:
                if self.place.version == 1:
                    # Pages its processes left (files they wrote, page cache) charged to it would keep
                    # a removed cgroup alive in the kernel, unseen (review 40 L4): reclaimed first.
                    with contextlib.suppress(CgroupError):
                        _write(self.path / "memory.force_empty", "0")
                try:
                    self.path.rmdir()
                    return True
                except FileNotFoundError:
                    return True
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        logger.warning("cannot remove the worker's cgroup %s: %s", self.path, e)
                        return False
            for pid in left:  # v1, or v2 before cgroup.kill (5.14)
                self._kill(pid)
            if time.monotonic() >= deadline:
                logger.warning(
                    "the worker's cgroup %s still holds %s after %.0fs", self.path, left, timeout_s
                )
                return False
            time.sleep(0.01)

    def _kill(self, pid: int) -> None:
        """SIGKILL to ``pid`` only while it is a process of this cgroup: through a pidfd, opened first
        and checked against ``cgroup.procs`` after, so that a pid reused meanwhile by a process elsewhere
        is never signalled (review 40 L3); a plain kill where the kernel has no pidfd (before 5.3)."""
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        except OSError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            return
        try:
            if pid in self.processes():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
        finally:
            os.close(fd)
