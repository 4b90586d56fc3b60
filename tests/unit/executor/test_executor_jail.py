"""No host file reaches a verdict through the compiler (issue 27): the include rules on the spliced
text, the compile jail, the dependency-list check and the log cut, each on its own and together.

The secret is a file in the test's temporary directory, as a token or a password file would lie
beside the executor; every trick below names it by its absolute path.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from executor import jail
from executor.compile import INCLUDE_REFUSED, Compiler, find_toolchain, includes_outside
from executor.errors import EvaluationCancelled, ToolchainError
from executor.evaluate import Evaluator
from executor.static import check_source, splice_lines
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import ErrorKind, Stage
from tests.support.workers import describe_processes, processes_working_in

SECRET = "s3cr3t-7f2a-token"
LIBRARY = (
    '__global__ void k(float* x) { x[0] = 1.0f; }\nextern "C" void saxpy(int n, float a, const float* x,'
    " float* y) { k<<<1, 1>>>(y); }\n"
)


def _has_nvcc() -> bool:
    try:
        find_toolchain()
    except ToolchainError:
        return False
    return True


needs_nvcc = pytest.mark.skipif(not _has_nvcc(), reason="no nvcc here")


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A world-readable file outside every build directory (the jail must hide it, not its mode)."""
    path = tmp_path / "beside-the-executor" / "token.txt"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\n")
    path.chmod(0o644)
    tmp_path.chmod(0o755)
    return path


def tricks(path: Path) -> dict[str, str]:
    """Every way tried to make the preprocessor read ``path`` (a line of text, not C++)."""
    climb = "../" * 12 + str(path).lstrip("/")
    return {
        "angle_absolute": f"#include <{path}>\n",
        "quoted_absolute": f'#include "{path}"\n',
        "macro": f'#define F "{path}"\n#include F\n',
        "macro_angle": f"#define F <{path}>\n#include F\n",
        "spliced": f"#inc\\\nlude <{path}>\n",
        "digraph": f"%:include <{path}>\n",
        "climbing": f"#include <{climb}>\n",
        "comment_in_directive": f"#/**/include /**/ <{path}>\n",
        "has_include": f"#if __has_include(<{path}>)\nint probe;\n#endif\n",
        "include_next": f"#include_next <{path}>\n",
        "pragma_dependency": f'#pragma GCC dependency "{path}"\n',
    }


def test_every_include_trick_is_refused_by_the_static_check(
    saxpy: FunctionTask | KernelTask, secret: Path
) -> None:
    for name, trick in tricks(secret).items():
        violations = check_source(saxpy, trick + LIBRARY)
        rules = {v.rule.split(":")[0] for v in violations}
        assert rules & {"local_include", "include_path", "forbidden_directive"}, (name, violations)


def test_toolkit_headers_and_spliced_macros_stay_allowed(saxpy: FunctionTask | KernelTask) -> None:
    source = (
        "#include <cuda_fp16.h>\n#include <cub/cub.cuh>\n#if __has_include(<cuda_bf16.h>)\n#endif\n"
        "#define TWICE(x) \\\n  ((x) + \\\n   (x))\n" + LIBRARY
    )
    assert check_source(saxpy, source) == []


def test_a_call_split_by_a_backslash_newline_is_seen_whole(saxpy: FunctionTask | KernelTask) -> None:
    source = LIBRARY + 'static void leak() { auto f = fo\\\npen("x", "r"); (void)f; }\n'
    rules = [v.rule for v in check_source(saxpy, source)]
    assert "forbidden_call:fopen" in rules
    # line numbers survive the splice: the call is reported on its first physical line
    assert splice_lines("a\\\nb\nc").split("\n") == ["ab", "", "c"]


def test_the_jail_hides_every_host_file_but_the_toolchain(tmp_path: Path, secret: Path) -> None:
    if jail.protection() != "namespace":
        pytest.skip("no namespaces here: the uid fallback only hides files that root alone may read")
    work = tmp_path / "build"
    work.mkdir()
    box = jail.Jail(read_only=jail.host_toolchain_paths())
    code, out = box.run(["cat", str(secret)], work, timeout_s=30)
    assert code != 0 and SECRET not in out
    code, out = box.run(["sh", "-c", "ls /; echo written > product; id -u"], work, timeout_s=30)
    assert code == 0, out
    assert (work / "product").read_text() == "written\n"
    assert out.split()[-1] == (str(jail.JAIL_UID) if os.geteuid() == 0 else "0")
    assert set(out.split()[:-1]) <= {
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "usr",
        "etc",
        "dev",
        "proc",
        "tmp",
    }
    (work / "a.cpp").write_text(f"#include <{secret}>\n")
    code, out = box.run(["g++", "-c", "a.cpp"], work, timeout_s=60)
    assert code != 0 and SECRET not in out and "No such file" in out


def test_a_timed_out_jailed_command_leaves_no_process(tmp_path: Path) -> None:
    work = tmp_path / "build"
    work.mkdir()
    box = jail.Jail(read_only=jail.host_toolchain_paths())
    start = time.monotonic()
    code, _ = box.run(["sh", "-c", "sleep 60 & sleep 60"], work, timeout_s=1.0)
    assert code is None and time.monotonic() - start < 30
    deadline = time.monotonic() + 10
    while processes_working_in(work):
        assert time.monotonic() < deadline, "a jailed process outlived its timeout"
        time.sleep(0.1)


def test_a_jailed_command_stops_when_its_service_stops(tmp_path: Path) -> None:
    """A reference build told to stop (the service shuts down) is killed at once, process group and
    all, instead of running to its 120-s limit."""
    work = tmp_path / "build"
    work.mkdir()
    box = jail.Jail(read_only=jail.host_toolchain_paths())
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    start = time.monotonic()
    with pytest.raises(EvaluationCancelled):
        box.run(["sh", "-c", "sleep 60 & sleep 60"], work, timeout_s=120.0, stop=stop)
    assert time.monotonic() - start < 10
    deadline = time.monotonic() + 10
    while processes_working_in(work):
        assert time.monotonic() < deadline, "a jailed process outlived its stop"
        time.sleep(0.1)
    # Without a stop, the output of a command that ends is all there (read across the short waits).
    code, out = box.run(
        ["sh", "-c", "echo one; sleep 0.3; echo two"], work, timeout_s=30, stop=threading.Event()
    )
    assert code == 0 and out.split() == ["one", "two"]


def test_the_log_cut_drops_what_other_files_say() -> None:
    edg = (
        f"/srv/x/token.txt(1): error: this declaration has no storage class\n  {SECRET}\n  ^\n\n"
        'candidate.cu(4): error: identifier "y" is undefined\n  int z = y;\n          ^\n\n'
        '2 errors detected in the compilation of "candidate.cu".\n'
    )
    gcc = (
        f"In file included from candidate.cu:1:\n/srv/x/token.txt:1:1: error: '{SECRET}' does not name a"
        f" type\n    1 | {SECRET}\n      | ^~~~~~\ncompilation terminated.\n"
    )
    for log in (edg, gcc):
        cut = jail.cut_log(log, ("candidate.cu",))
        assert SECRET not in cut, cut
        assert "line(s) about other files removed" in cut
    assert 'identifier "y" is undefined' in jail.cut_log(edg, ("candidate.cu",))
    assert jail.cut_log("/w/build/candidate.cu(3): warning", ("candidate.cu",), Path("/w/build")) == (
        "candidate.cu(3): warning"
    )


def test_a_dependency_outside_the_toolchain_is_found(tmp_path: Path) -> None:
    depfile = tmp_path / "candidate.d"
    depfile.write_text(
        "candidate.so : candidate.cu \\\n    /opt/cuda/bin/../include/cuda_runtime.h \\\n"
        "    /usr/include/stdio.h \\\n    /srv/my\\ secrets/token.txt\n"
    )
    assert includes_outside(depfile, tmp_path, ["/opt/cuda", "/usr/include"]) == "/srv/my secrets/token.txt"
    depfile.write_text("candidate.so : candidate.cu /opt/cuda/include/x.h\n")
    assert includes_outside(depfile, tmp_path, ["/opt/cuda"]) is None
    assert includes_outside(tmp_path / "none.d", tmp_path, []) is not None


@needs_nvcc
def test_no_trick_shows_the_secret_in_an_nvcc_build_log(tmp_path: Path, secret: Path) -> None:
    compiler = Compiler(tmp_path / "cache", choice="nvcc")
    for name, trick in tricks(secret).items():
        result = compiler.compile_source(trick + LIBRARY, "shared_library")
        assert SECRET not in result.log, (name, result.log)
        assert SECRET not in result.model_dump_json(), name
    if jail.protection() == "namespace":
        # what the preprocessor read is checked too: a toolkit header is fine, and the build says
        # which protection it ran under
        fine = compiler.compile_source("#include <cuda_fp16.h>\n" + LIBRARY, "shared_library")
        assert fine.ok, fine.log
        assert "mount-namespace jail" in fine.log


@needs_nvcc
def test_a_build_that_read_a_file_outside_the_toolchain_is_refused(
    tmp_path: Path, saxpy: FunctionTask | KernelTask
) -> None:
    # A header inside the build directory is allowed; one in a directory added to the jail's
    # read-only paths (and so readable) but not an include root is refused after the build.
    compiler = Compiler(tmp_path / "cache", choice="nvcc")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "defs.h").write_text("#define N 4\n")
    original = jail.host_toolchain_paths

    def wider(cxx: str | None = None) -> list[str]:
        return [*original(cxx), str(extra)]

    try:
        jail.host_toolchain_paths = wider  # type: ignore[assignment]
        import executor.compile as compile_module

        compile_module.host_toolchain_paths = wider  # type: ignore[assignment]
        result = compiler.compile_source(f"#include <{extra / 'defs.h'}>\n" + LIBRARY, "shared_library")
    finally:
        jail.host_toolchain_paths = original  # type: ignore[assignment]
        compile_module.host_toolchain_paths = original  # type: ignore[assignment]
    assert not result.ok
    assert result.log.startswith(INCLUDE_REFUSED) and str(extra / "defs.h") in result.log
    verdict = Evaluator._compile_failure(None, saxpy, result, {}, None)  # type: ignore[arg-type]
    assert (verdict.stage, verdict.error) == (Stage.STATIC, ErrorKind.STATIC_REJECTED)
    assert verdict.message.startswith(INCLUDE_REFUSED)


@needs_nvcc
def test_a_killed_executor_leaves_no_compiler_behind(tmp_path: Path) -> None:
    """kill -9 of the process that compiles: nvcc and its stages die with it (issue 27, item 6)."""
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from executor.compile import Compiler
        source = "#include <cub/cub.cuh>\\n" + {LIBRARY!r}
        Compiler(Path({str(tmp_path / "cache")!r}), choice="nvcc").compile_source(source, "shared_library")
        """
    )
    executor = subprocess.Popen([sys.executable, "-c", script], start_new_session=False)
    deadline = time.monotonic() + 60
    while not [
        p for p in processes_working_in(tmp_path / "cache") if b"nvcc" in (p / "cmdline").read_bytes()
    ]:
        assert executor.poll() is None, "the build ended before it could be interrupted"
        assert time.monotonic() < deadline, "nvcc never started"
        time.sleep(0.02)
    os.kill(executor.pid, signal.SIGKILL)
    executor.wait()
    deadline = time.monotonic() + 15
    while left := processes_working_in(tmp_path / "cache"):
        # seen failing under load (sessions 17, 31, 37: nvcc, sh and cc1plus still there after 15 s);
        # the message says in which namespace they ran and under which jail, for the next time
        assert time.monotonic() < deadline, (jail.protection(), describe_processes(left))
        time.sleep(0.1)


def test_a_killed_parent_takes_its_whole_jail_down(tmp_path: Path) -> None:
    """Processes that write nothing (no broken pipe to end them) die with the process that started
    the jail: the parent-death signal survives the drop to the unprivileged uid."""
    work = tmp_path / "build"
    work.mkdir()
    script = (
        "import sys; from pathlib import Path; from executor import jail; "
        "jail.Jail(read_only=jail.host_toolchain_paths()).run(['sh', '-c', 'sleep 100 & sleep 100'], "
        f"Path({str(work)!r}), 300)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    while len(processes_working_in(work)) < 3:  # unshare, sh and the two sleeps
        assert parent.poll() is None and time.monotonic() < deadline, "the jail never started"
        time.sleep(0.05)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while left := processes_working_in(work):
        assert time.monotonic() < deadline, [(p / "cmdline").read_bytes()[:80] for p in left]
        time.sleep(0.1)


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid fallback drops root's rights; needs root")
@pytest.mark.parametrize("nice", [0, 5])
def test_the_uid_fallback_runs_in_the_build_directory_as_nobody_at_the_lowered_priority(
    tmp_path: Path, nice: int
) -> None:
    # The fallback where namespaces are refused (Docker's seccomp): the build directory lies under a
    # directory only root may enter (pytest's own temporary root is 0700), so it must be entered
    # before the uid change; the command runs as the jail's uid at the priority asked for.
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    work = private / "work"
    work.mkdir()
    own = os.getpriority(os.PRIO_PROCESS, 0)
    code, out = jail.Jail().run(
        ["/bin/sh", "-c", "id -u; pwd; cut -d' ' -f19 /proc/self/stat"], work, 10, nice=nice, forced="uid"
    )
    assert code == 0, out
    uid, cwd, niceness = out.split()
    assert int(uid) == jail.JAIL_UID
    assert cwd == str(work)
    assert int(niceness) == min(19, own + nice)


@pytest.mark.skipif(jail.protection() != "namespace", reason="no namespaces on this host")
def test_the_jails_mounts_are_locked_against_its_own_root(tmp_path: Path) -> None:
    """Review 40 H1: an executor that is not root runs its jail's command as the user namespace's root,
    which could remount a read-only bind read-write (the reviewer's setup: then raise its cgroup's limit)
    or unmount it. jail_init locks the mounts in a nested user namespace (``lock_mounts``, set where the
    executor is not root). Here, as root, the command runs as root with the lock (its uid left as it is):
    the remount and the unmounts are refused, the bind stays read-only. Without the lock, root's remount
    succeeded (seen with lock_mounts False)."""
    bound = tmp_path / "ro"
    bound.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    box = jail.Jail(read_only=(*jail.HOST_PATHS, str(bound)))
    spec = box._spec(tmp_path / "root", work)
    spec.update(uid=None, lock_mounts=True)
    (tmp_path / "root").mkdir()
    script = (
        f"mount -o remount,bind,rw {bound} && echo remounted; umount {bound} && echo unmounted; "
        f"umount -l /usr && echo unmounted-usr; touch {bound}/x && echo written; id -u"
    )
    out = subprocess.run(
        [
            *jail._unshare_args(),
            sys.executable,
            "-I",
            "-S",
            str(jail._INIT),
            json.dumps(spec),
            "--",
            "sh",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"], (out.stdout, out.stderr)
    assert not (bound / "x").exists()


_ESCAPE = """
import os, sys
os.mkdir("/tmp/x")
try:
    os.chroot("/tmp/x")
except PermissionError:
    print("chroot refused")
    sys.exit(0)
for _ in range(64):
    os.chdir("..")
os.chroot(".")
print("escaped", os.path.exists(sys.argv[1]))
"""


@pytest.mark.skipif(jail.protection() != "namespace", reason="no namespaces on this host")
@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no /usr/bin/python3 in the jail's reach")
@pytest.mark.parametrize("lock", [True, False])
def test_the_jails_own_root_cannot_chroot_out_of_it(tmp_path: Path, lock: bool) -> None:
    """Review 40b's H-a: an executor that is not root runs its jail's command as the user namespace's
    root, which kept its capabilities: ``mkdir x; chroot x; chdir ..`` (64 times); ``chroot .`` put it at
    the mount namespace's root, the host's whole tree (the reviewer, as uid 1000: the host's files seen
    and the executor's package written). jail_init drops every capability of such a command (the
    bounding set too) after its chroot, lock or no lock. Here, as root, the command runs as root
    (``uid`` None, as for an executor that is not root). With the drop taken out, it escaped (both
    cases)."""
    outside = tmp_path / "outside-marker"
    outside.touch()
    work = tmp_path / "work"
    work.mkdir()
    box = jail.Jail(read_only=(*jail.HOST_PATHS, "/usr/bin/python3"))
    spec = box._spec(tmp_path / "root", work)
    spec.update(uid=None, lock_mounts=lock)
    (tmp_path / "root").mkdir()
    init = [sys.executable, "-I", "-S", str(jail._INIT), json.dumps(spec), "--"]
    out = subprocess.run(
        [*jail._unshare_args(), *init, "/usr/bin/python3", "-I", "-S", "-c", _ESCAPE, str(outside)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["chroot", "refused"], (out.stdout, out.stderr)


# How a jail's command is run in the tests below: ``root`` as a root executor runs it (the command drops to
# jail.JAIL_UID), ``command-root`` as root with the command left root and the mounts locked (as for an
# executor that is not root, the existing tests' way), ``not-root`` by an executor that is not root
# (uid 65534 through setpriv: ``unshare --user --map-root-user``, the command the user namespace's root).
JAIL_MODES = ("root", "command-root", "not-root")


def _not_root_refused() -> str | None:
    """Why a jail cannot be made here by uid 65534 (None: it can)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv to run a jail as uid 65534"
    as_65534 = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    probe = subprocess.run(
        [*as_65534, "unshare", "--user", "--map-root-user", "--mount", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return None if probe.returncode == 0 else f"no user namespace for uid 65534 here: {probe.stderr.strip()}"


def _in_jail(mode: str, script: str, read_only: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """``script`` run by /usr/bin/python3 in a jail made as ``mode`` says; its stdout's lines, its stderr."""
    if jail.protection() != "namespace":
        pytest.skip("no namespaces on this host")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no /usr/bin/python3 in the jail's reach")
    prefix: list[str] = []
    args = jail._unshare_args()
    if mode == "not-root":
        why = _not_root_refused()
        if why is not None:
            pytest.skip(why)
        prefix = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
        if "--user" not in args:
            args = [args[0], "--user", "--map-root-user", *args[1:]]
    base = Path(tempfile.mkdtemp(prefix="regraph-jail-test-"))  # reachable by uid 65534
    try:
        (base / "root").mkdir()
        (base / "work").mkdir()
        for path in (base, base / "root", base / "work"):
            path.chmod(0o755)
            os.chown(path, 65534, 65534)
        box = jail.Jail(read_only=(*jail.HOST_PATHS, "/usr/bin/python3", *read_only))
        spec = box._spec(base / "root", base / "work")
        if mode != "root":
            spec.update(uid=None, lock_mounts=True)
        init = ["/usr/bin/python3", "-I", "-S", str(jail._INIT), json.dumps(spec), "--"]
        out = subprocess.run(
            [*prefix, *args, *init, "/usr/bin/python3", "-I", "-S", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert out.returncode == 0, (out.stdout, out.stderr)
    return out.stdout.splitlines(), out.stderr


_RAISE_IPC_LIMITS = """
import os
for name in ("kernel/shmmax", "kernel/msgmax"):
    try:
        with open("/proc/sys/" + name, "w") as f:
            f.write("1073741824")
        print("written", name)
    except OSError as e:
        print("refused", name, e.strerror)
print("shmmax", open("/proc/sys/kernel/shmmax").read().strip(), "uid", os.getuid())
"""


@pytest.mark.parametrize("mode", JAIL_MODES)
def test_the_jails_sysctls_are_read_only(mode: str) -> None:
    """Review 40b's L-a: the jail's IPC sysctls belong to its IPC namespace's owner; an executor that is
    not root runs its command as that (user) namespace's root, which wrote ``kernel/shmmax`` and
    ``kernel/msgmax`` (no capability needed), raising the SysV limits jail_init lowers. jail_init binds
    ``/proc/sys`` read-only over itself: refused whoever writes. Without that bind, both writes succeeded
    as ``command-root`` and ``not-root``, and ``root``'s were refused only by the files' mode
    (``Permission denied``)."""
    lines, err = _in_jail(mode, _RAISE_IPC_LIMITS)
    refused = [line for line in lines if line.startswith(("refused", "written"))]
    assert refused == [f"refused kernel/{name} Read-only file system" for name in ("shmmax", "msgmax")], (
        lines,
        err,
    )
    uid = str(jail.JAIL_UID) if mode == "root" else "0"
    assert lines[-1] == f"shmmax {16 << 20} uid {uid}", lines  # jail_init.IPC_LIMITS, still


_LOOK_AT_CGROUPS = """
import os
print("cgroup", sorted(os.listdir("/sys/fs/cgroup")))
try:
    os.mkdir("/sys/fs/cgroup/regraph-probe")
    print("made")
except OSError as e:
    print("refused", e.strerror)
print("devices", len(os.listdir("/sys/devices")) > 0)
"""


@pytest.mark.parametrize("mode", JAIL_MODES)
def test_no_cgroup_is_seen_in_the_jail(mode: str) -> None:
    """Review 40b's L-c: a jail that binds /sys (a GPU worker's, for the CUDA driver) showed every cgroup's
    figures below /sys/fs/cgroup (a side channel on the host's services and the other workers). jail_init
    covers it with an empty read-only tmpfs; the rest of /sys stays (the driver's devices). Without the
    cover, the host's hierarchies were listed (``memory``, ``cpu``, ... here)."""
    if not Path("/sys/fs/cgroup").is_dir():
        pytest.skip("no /sys/fs/cgroup here")
    lines, err = _in_jail(mode, _LOOK_AT_CGROUPS, read_only=("/sys",))
    assert lines == ["cgroup []", "refused Read-only file system", "devices True"], (lines, err)


# A process under a seccomp filter that refuses unshare(2) with CLONE_NEWCGROUP (EINVAL, as a kernel
# without cgroup namespaces answers), inherited by all it starts; then the jail's probe, a jailed
# command and a worker's start-up probe, as the executor makes them, and what the log said.
_NO_CGROUP_NAMESPACE = """
import ctypes, errno, json, logging, os, platform, struct, subprocess, sys, tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from executor import jail, jail_init
seccomp, arch = jail_init._KEYRING_CALLS[platform.machine()][:2]
unshare = {"x86_64": 272, "aarch64": 97}[platform.machine()]
bpf = jail_init._bpf
allow, einval = 0x7FFF0000, 0x00050000 | errno.EINVAL
prog = [bpf(0x20, 4), bpf(0x15, arch, 1, 0), bpf(0x06, allow), bpf(0x20, 0), bpf(0x15, unshare, 0, 3)]
prog += [bpf(0x20, 16), bpf(0x45, 0x02000000, 0, 1), bpf(0x06, einval), bpf(0x06, allow)]
code = ctypes.create_string_buffer(b"".join(prog))
fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(code))
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.syscall(ctypes.c_long(seccomp), ctypes.c_long(1), ctypes.c_long(0), ctypes.c_char_p(fprog)) == 0
refused = subprocess.run(["unshare", "--cgroup", "true"], capture_output=True, text=True)
records = []
handler = logging.Handler()
handler.emit = records.append
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.INFO)
kind = jail.protection()
work = Path(tempfile.mkdtemp())
os.chmod(work, 0o777)
rc, out = jail.Jail(read_only=jail.HOST_PATHS).run(
    ["sh", "-c", "readlink /proc/self/ns/pid /proc/self/ns/cgroup; id -u"], work, timeout_s=60
)
from executor.sandbox import worker_protection
worker = worker_protection("host", "candidate")
print(json.dumps({
    "refused": refused.returncode != 0, "protection": kind, "args": jail._unshare_args(), "rc": rc,
    "seen": out.split(), "worker": worker, "said": [r.getMessage() for r in records if "cgroup namespace" in r.getMessage()],
    "host": [os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/cgroup")],
}))
"""


@pytest.mark.skipif(jail.protection() != "namespace", reason="no namespaces on this host")
@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no system call numbers here")
def test_without_cgroup_namespaces_the_jails_keep_the_other_namespaces_and_say_so(tmp_path: Path) -> None:
    """Review 40b's L-b: a kernel without cgroup namespaces refused the whole ``unshare ... --cgroup``, so
    the probe failed and compiles and workers fell to ``uid`` (or ``none``) with only the generic warning.
    Under a seccomp filter that refuses the cgroup namespace alone, the jail now runs in its mount, PID
    and IPC namespaces without it (its pid namespace not the host's, its cgroup namespace the host's), a
    worker starts jailed, and the log says once what was lost. Before, ``protection()`` was ``uid`` here."""
    out = subprocess.run(
        [sys.executable, "-c", _NO_CGROUP_NAMESPACE],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout.splitlines()[-1])
    assert answer["refused"], answer
    assert answer["protection"] == "namespace", (answer, out.stderr[-3000:])
    assert "--cgroup" not in answer["args"] and "--pid" in answer["args"], answer
    assert answer["rc"] == 0, answer
    pid_ns, cgroup_ns, uid = answer["seen"]
    assert pid_ns != answer["host"][0] and cgroup_ns == answer["host"][1], answer
    assert uid == (str(jail.JAIL_UID) if os.geteuid() == 0 else "0")
    assert answer["worker"] == "namespace", (answer, out.stderr[-3000:])
    warned = [line for line in answer["said"] if "without a cgroup namespace (the kernel refused one" in line]
    assert len(warned) == 1 and "Invalid argument" in warned[0], answer["said"]


# An ``unshare`` of the test's own, first on PATH (the jail finds it there): for each call, in turn, the
# next line of its plan file: "ok" runs the real one, "busy" fails as a loaded host's fork can, "refuse"
# fails as a kernel without cgroup namespaces does where --cgroup is asked (else runs the real one).
# Each call's --cgroup (1 or 0) is appended to its log.
UNSHARE = """#!/bin/sh
here=$(dirname "$0")
asked=0; for a in "$@"; do [ "$a" = --cgroup ] && asked=1; done
echo $asked >> "$here/asked"
step=$(head -n 1 "$here/plan"); sed -i 1d "$here/plan"
case "$step" in
  busy) echo "unshare: fork failed: Resource temporarily unavailable" >&2; exit 1 ;;
  refuse) if [ $asked = 1 ]; then echo "unshare: unshare failed: Invalid argument" >&2; exit 1; fi ;;
esac
exec REAL "$@"
"""


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., None]]:
    """Make :func:`jail.protection` probe again through :data:`UNSHARE` (in ``tmp_path``) following a
    plan: yields the call that sets the plan. Its cache cleared after, so that the next asks the host."""
    monkeypatch.delenv("REGRAPH_JAIL", raising=False)
    monkeypatch.setattr(jail, "_cgroup_namespace", jail._cgroup_namespace)
    real = shutil.which("unshare")
    if not sys.platform.startswith("linux") or real is None:
        pytest.skip("no unshare here")
    (tmp_path / "unshare").write_text(UNSHARE.replace("REAL", real))
    (tmp_path / "unshare").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")

    def probe(*plan: str) -> None:
        (tmp_path / "plan").write_text("".join(f"{step}\n" for step in plan))
        (tmp_path / "asked").write_text("")
        jail.protection.cache_clear()

    try:
        yield probe
    finally:
        jail.protection.cache_clear()


def _asked(where: Path) -> list[bool]:
    """Whether each probe since the plan was set asked for ``--cgroup``."""
    return [line == "1" for line in (where / "asked").read_text().split()]


def test_one_failed_probe_does_not_drop_the_cgroup_namespace(
    probed: Callable[..., None], tmp_path: Path
) -> None:
    """Review 41 L1: any first failure (its 30 s passed under load, a fork refused) dropped
    ``--cgroup`` for the process's life. Now a second probe with it decides: here it passes, and the
    namespace is kept."""
    probed("busy", "ok", "ok")
    assert jail.protection() == "namespace"
    assert jail.cgroup_namespace()
    assert "--cgroup" in jail._unshare_args()
    assert _asked(tmp_path) == [True, False, True]


def test_the_cgroup_namespace_is_dropped_when_refused_or_failing_twice(
    probed: Callable[..., None], tmp_path: Path
) -> None:
    probed("refuse", "ok")  # the kernel's refusal: no second probe with it
    assert jail.protection() == "namespace" and not jail.cgroup_namespace()
    assert "--cgroup" not in jail._unshare_args() and "--pid" in jail._unshare_args()
    assert _asked(tmp_path) == [True, False]
    probed("busy", "ok", "busy")  # failed twice with it, passed without
    assert jail.protection() == "namespace" and not jail.cgroup_namespace()
    assert _asked(tmp_path) == [True, False, True]


def test_probing_again_forgets_an_earlier_fallback(probed: Callable[..., None], tmp_path: Path) -> None:
    """Review 41 L1: ``protection.cache_clear()`` probed again but kept the module's flag."""
    probed("refuse", "ok")
    assert not jail.cgroup_namespace()
    probed("ok")
    assert jail.protection() == "namespace" and jail.cgroup_namespace()
    assert _asked(tmp_path) == [True]
