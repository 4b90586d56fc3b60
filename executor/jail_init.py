"""The first process inside a compile jail (see :mod:`executor.jail`); standard library only.

Run as ``python -I jail_init.py SPEC_JSON -- COMMAND...`` by ``unshare --mount --ipc --pid --cgroup
--fork`` (``--cgroup`` left out where the kernel refuses it; plus ``--user --map-root-user`` where the
executor is not root): it builds a new root on a tmpfs with only the paths the spec names bind-mounted (read-only unless listed as writable, all the way down), a
fresh /proc (its /proc/sys read-only) and /tmp, /sys/fs/cgroup covered by an empty read-only tmpfs where
/sys is bound, SysV IPC's limits lowered in its IPC namespace (where the spec says it has one of
its own), locks those mounts in a nested user namespace where the spec says so (the executor not root),
chroots into it, drops to the spec's unprivileged uid when it has one, and execs the command. Any
failure ends it with status 125 and one line on stderr that starts with ``jail:``; the command never
runs outside the jail.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import struct
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
PR_SET_NO_NEW_PRIVS = 38
# mount_setattr(2) (Linux 5.12; the same number on x86-64 and aarch64): a bind read-only all the way down.
_SYS_MOUNT_SETATTR = 442
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NODEV = 1, 2, 4
PR_SET_PDEATHSIG = 1
SIGKILL = 9

# statvfs flags that a read-only remount of a bind mount must keep (the kernel refuses to clear a
# flag that the mount it comes from has locked in a user namespace).
_KEPT = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}

_libc = ctypes.CDLL(None, use_errno=True)

# The kernel's keyrings are no namespace's: a user's keyring (uid 65534's, every jailed process's) lives
# on after its processes, so a candidate could keep answers there for a later evaluation (review 25's
# probe: a key added in one jail was read in the next). Refused in the jail by a seccomp filter.
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
_EPERM = 1
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_JGE_K, _BPF_RET_K = 0x20, 0x15, 0x35, 0x06
# machine: (seccomp's system call, its audit arch, add_key, request_key, keyctl)
_KEYRING_CALLS = {
    "x86_64": (317, 0xC000003E, 248, 249, 250),
    "aarch64": (277, 0xC00000B7, 217, 218, 219),
}


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAP_VERSION_3 = 0x20080522


def _drop_capabilities() -> None:
    """Drop every capability of this process, and every one an exec could give it back (the bounding
    set, the ambient set). For a jail whose command stays the root of its user namespace (an executor
    that is not root: no uid to drop to): with its capabilities there, that root could ``chroot`` out of
    the jail (``mkdir x; chroot x; chdir ..`` to the mount namespace's root; review 40b's H-a, seen with
    an executor of uid 1000: the host's tree visible and the executor's package written) or remount
    what is not locked. Without them it is one more unprivileged uid, which owns the files the executor's
    uid owns (read-only binds stay read-only: no capability to remount them)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:  # none
            raise OSError(ctypes.get_errno(), f"cannot drop capability {cap} from the bounding set")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (two words each): none
    if _libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "cannot drop the capabilities")


def _forbid_keyrings() -> None:
    """Refuse (EPERM) ``add_key``, ``request_key`` and ``keyctl`` to this process and all it starts,
    and every call of another ABI than the machine's (x86-64's 32-bit ``int 0x80``, x32), which would
    reach them by other numbers. Needs no-new-privileges. A machine without a table here runs without."""
    machine = platform.machine()
    if machine not in _KEYRING_CALLS:
        return
    seccomp, arch, *refused = _KEYRING_CALLS[machine]
    eperm = _SECCOMP_RET_ERRNO | _EPERM
    prog = [_bpf(_BPF_LD_W_ABS, 4), _bpf(_BPF_JEQ_K, arch, 1, 0), _bpf(_BPF_RET_K, eperm)]
    prog += [_bpf(_BPF_LD_W_ABS, 0), _bpf(_BPF_JGE_K, 0x40000000, 0, 1), _bpf(_BPF_RET_K, eperm)]
    for number in refused:
        prog += [_bpf(_BPF_JEQ_K, number, 0, 1), _bpf(_BPF_RET_K, eperm)]
    prog.append(_bpf(_BPF_RET_K, _SECCOMP_RET_ALLOW))
    program = ctypes.create_string_buffer(b"".join(prog))
    fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(program))
    _libc.syscall.restype = ctypes.c_long
    result = _libc.syscall(
        ctypes.c_long(seccomp),
        ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(0),
        ctypes.create_string_buffer(fprog, len(fprog)),
    )
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp refused the keyring filter: {os.strerror(err)}")


def _fail(message: str) -> None:
    sys.stderr.write(f"jail: {message}\n")
    sys.stderr.flush()
    os._exit(125)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    res = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    if res != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _place(root: str, path: str) -> str:
    """The mount point for ``path`` under ``root``: a directory or an empty file like the source."""
    target = root + path
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            with open(target, "w"):
                pass
    return target


def _bind(root: str, path: str, writable: bool, device: bool) -> None:
    if os.path.islink(path):
        # /lib -> usr/lib on merged-/usr systems: the link itself, its target is bound on its own.
        target = root + path
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if not os.path.exists(path):
        return
    target = _place(root, path)
    _mount(path, target, None, MS_BIND | MS_REC)
    if writable:
        return
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID
    if not device:
        flags |= MS_NODEV
    _remount_read_only(target, path, flags)
    _read_only_below(target, device, flags)


def _remount_read_only(target: str, source: str, flags: int) -> None:
    vfs = os.statvfs(source).f_flag
    for bit, mflag in _KEPT.items():
        if vfs & bit:
            flags |= mflag
    _mount(None, target, None, flags)


def _read_only_below(target: str, device: bool, flags: int) -> None:
    """Make every mount below the read-only bind ``target`` read-only too: a recursive bind remounted
    read-only stays writable below its top (review 40 H1: /sys's /sys/fs/cgroup, where a worker's
    memory cgroup is). mount_setattr with AT_RECURSIVE where the kernel has it, else each mount below
    remounted with ``flags`` (the bind's own: read-only, nosuid, nodev unless ``device``)."""
    attr = struct.pack(
        "=QQQQ", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | (0 if device else _MOUNT_ATTR_NODEV), 0, 0, 0
    )
    _libc.syscall.restype = ctypes.c_long
    done = _libc.syscall(
        ctypes.c_long(_SYS_MOUNT_SETATTR),
        ctypes.c_int(_AT_FDCWD),
        target.encode(),
        ctypes.c_uint(_AT_RECURSIVE),
        ctypes.create_string_buffer(attr, len(attr)),
        ctypes.c_size_t(len(attr)),
    )
    if done == 0:
        return
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f if len(line.split()) > 4]
    for point in points:
        point = (
            point.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        )
        if point.startswith(target.rstrip("/") + "/"):
            _remount_read_only(point, point, flags)


# SysV IPC's limits in the jail's own IPC namespace (its sysctls are the namespace's, writable by its
# owner: root, or the user namespace's mapped root). Segments filled and detached, and messages left in
# queues, hold host memory that no process maps: outside RLIMIT_AS and any process's RSS (review 39b's
# probe held 2 x 128 MiB while its VmSize read 162,412 kB). Nothing of the executor's uses SysV IPC.
IPC_LIMITS = {
    "kernel/shmmax": 16 << 20,  # bytes in one segment
    "kernel/shmall": (32 << 20) // 4096,  # pages in all of them
    "kernel/shmmni": 16,  # segments
    "kernel/msgmni": 16,  # message queues (each of kernel/msgmnb bytes, 16 KiB by default)
}


def _limit_ipc() -> None:
    """Lower SysV IPC's limits in this (new) IPC namespace: best effort (a read-only ``/proc/sys``,
    as in some containers, leaves the host's limits; said nowhere but docs/executor.md)."""
    for name, value in IPC_LIMITS.items():
        with contextlib.suppress(OSError), open(f"/proc/sys/{name}", "w") as f:
            f.write(str(value))


def _read_only_proc_sys(target: str) -> None:
    """Bind the jail's ``/proc/sys`` over itself read-only (review 40b's L-a). Its IPC sysctls belong to
    the uid that owns the jail's IPC namespace: an executor that is not root runs its command as that
    namespace's root (its own uid mapped), which may write them without any capability and so raise
    the SysV limits that :func:`_limit_ipc` lowered (``kernel/shmmax``, ``kernel/msgmax``). Read-only,
    every write is refused (``EROFS``), whoever the command is; locked with the other mounts."""
    _mount(target, target, None, MS_BIND | MS_REC)
    _remount_read_only(target, target, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


# Paths covered in the jail, where a bind shows them (``/sys``, bound for the CUDA driver), by an empty
# read-only tmpfs: every cgroup's figures (memory, CPU, processes of every service on the host) were
# readable there, a side channel (review 40b's L-c). The executor reads its workers' figures from
# outside their jails; nothing in a jail reads a cgroup file.
COVERED = ("/sys/fs/cgroup",)


def _cover(root: str) -> None:
    """Cover each of :data:`COVERED` that the jail's root shows (a directory, reached without a link)."""
    for path in COVERED:
        target = root + path
        if os.path.isdir(target) and os.path.realpath(target) == os.path.realpath(root) + path:
            _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=555,size=4k")


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000


def _lock_mounts() -> None:
    """Lock the jail's mounts: enter a user namespace (and a mount namespace) of their own below the one
    that made them, mapping only this process's ids. An executor that is not root runs the jail in a
    user namespace whose root (the executor's uid) may remount or unmount what that namespace mounted:
    the command could remount a read-only bind read-write (/sys/fs/cgroup below /sys, the executor's own
    package) and write what the executor's uid owns (review 40 H1, seen with the reviewer's setup). Mounts
    copied into a less privileged namespace are locked: their flags stay and they cannot be unmounted.
    Must come before the chroot (the kernel refuses a user namespace to a chrooted process). Where the
    kernel refuses the nested namespace (a limit of user namespaces, a security module) the jail fails
    (status 125) rather than run unlocked: review 40b's M-a."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        # Fail closed (review 40b's M-a: refused, the jail ran unlocked and nothing said so).
        raise OSError(ctypes.get_errno(), "cannot lock the jail's mounts (a user namespace was refused)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def main(argv: list[str]) -> None:
    """Build the jail described by ``argv[0]`` (JSON) and exec ``argv[2:]`` in it."""
    if len(argv) < 3 or argv[1] != "--":
        _fail("usage: jail_init.py SPEC -- COMMAND...")
    spec = json.loads(argv[0])
    command = argv[2:]
    root: str = spec["root"]
    try:
        _libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        for path in spec.get("required", []):
            if not os.path.exists(path):
                raise OSError(2, f"a required path is missing: {path}")
        if spec.get("ipc_limits"):  # only in an IPC namespace of the jail's own: never the host's
            _limit_ipc()  # through the host's /proc, before the jail's own replaces it
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount("tmpfs", root, "tmpfs", MS_NOSUID, f"mode=755,size={spec.get('tmpfs_size', '1g')}")
        for path in spec.get("read_only", []):
            _bind(root, path, writable=False, device=False)
        for path in spec.get("devices", []):
            _bind(root, path, writable=True, device=True)
        for path in spec.get("writable", []):
            _bind(root, path, writable=True, device=False)
        for path in spec.get("tmpfs", []):
            os.makedirs(root + path, exist_ok=True)
            _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m")
        # The jail's own /tmp, on its tmpfs: shared by nobody else.
        os.makedirs(root + "/tmp", exist_ok=True)  # noqa: S108
        os.chmod(root + "/tmp", 0o1777)  # noqa: S103, S108
        os.makedirs(root + "/proc", exist_ok=True)
        # a compiler runs without /proc; nvcc only reads its own path from it when present
        with contextlib.suppress(OSError):
            _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        if os.path.isdir(root + "/proc/sys"):
            _read_only_proc_sys(root + "/proc/sys")
        _cover(root)
        if spec.get("lock_mounts"):
            _lock_mounts()
        os.chroot(root)
        os.chdir(spec["cwd"])
        uid = spec.get("uid")
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        else:
            _drop_capabilities()
        # A change of uid clears the parent-death signal: set again, so that this process (the
        # command after exec, PID 1 of the namespace) dies with `unshare`, and every stage with it.
        _libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _forbid_keyrings()
    except OSError as e:
        _fail(str(e))
    env = {str(k): str(v) for k, v in spec.get("env", {}).items()}
    program = command[0]
    if "/" not in program:  # looked up here: os.execvpe imports modules the jail does not hold
        for entry in env.get("PATH", "/usr/bin:/bin").split(":"):
            if os.access(os.path.join(entry, program), os.X_OK):
                program = os.path.join(entry, program)
                break
    if spec.get("init"):
        _stay_init()
    try:
        os.execve(program, command, env)  # noqa: S606 - the jailed command, argv as given
    except OSError as e:
        _fail(f"cannot run {command[0]}: {e}")


def _stay_init() -> None:
    """Stay as the namespace's PID 1 and run the command in a child (which returns from here).

    The kernel delivers to a PID 1 only the signals it handles, so a command that is PID 1 cannot
    kill itself (``abort()`` ends in another fault). This init reaps every process of the namespace
    and exits when the command does, with its status, a signal ``N`` as ``128 + N``; its exit ends
    every other process of the namespace."""
    child = os.fork()
    if child == 0:
        _libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)  # cleared by fork
        return
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        except InterruptedError:
            continue
        if pid == child:
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


if __name__ == "__main__":
    main(sys.argv[1:])
