"""Where the workers' memory cgroups are made (:mod:`executor.cgroup`), on fake cgroup trees.

The dev machine has cgroup v1 (tests/integration/executor/test_worker_memory_cgroup.py runs real
workers there); the GPU hosts and most production hosts have v2, whose choices are checked here on
directories that stand for a cgroup2 mount (plain files for its interface files), and once on the
device by bench/device/cgroup_check.sh.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import executor.cgroup as cgroup_module
from executor.cgroup import (
    EXECUTOR_LEAF,
    PREFIX,
    CgroupError,
    CgroupPlace,
    WorkerCgroup,
    _delegated,
    _own_cgroups,
    _v2_place,
    default_pids_max,
    find_place,
)
from executor.settings import ExecutorSettings

# This dev machine's (hybrid: memory on a v1 hierarchy, an empty cgroup2 beside it) and a v2 host's.
HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_MEMBERSHIP = "4:memory:/process_api/abc\n3:cpuset:/\n0::/\n"
V2 = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V2_MEMBERSHIP = "0::/process_api/abc\n"
# A container's view of the host's v1 hierarchy: the mount's root is the container's cgroup.
CONTAINER_V1 = "50 40 0:32 /docker/c1 /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory\n"


def _files(tmp_path: Path, mountinfo: str, membership: str) -> tuple[Path, Path]:
    (tmp_path / "mountinfo").write_text(mountinfo)
    (tmp_path / "cgroup").write_text(membership)
    return tmp_path / "cgroup", tmp_path / "mountinfo"


def test_hybrid_hosts_use_the_memory_hierarchy_of_v1(tmp_path: Path) -> None:
    v1, v2, mount, _ = _own_cgroups(*_files(tmp_path, HYBRID, HYBRID_MEMBERSHIP))
    assert v1 == Path("/sys/fs/cgroup/memory/process_api/abc")
    assert v2 == Path("/sys/fs/cgroup/unified") and mount == Path("/sys/fs/cgroup/unified")


def test_a_v2_host(tmp_path: Path) -> None:
    v1, v2, mount, _ = _own_cgroups(*_files(tmp_path, V2, V2_MEMBERSHIP))
    assert v1 is None and v2 == Path("/sys/fs/cgroup/process_api/abc") and mount == Path("/sys/fs/cgroup")


def test_a_mount_whose_root_is_the_containers_cgroup(tmp_path: Path) -> None:
    v1, _, _, _ = _own_cgroups(*_files(tmp_path, CONTAINER_V1, "4:memory:/docker/c1\n"))
    assert v1 == Path("/sys/fs/cgroup/memory")
    v1, _, _, missing = _own_cgroups(*_files(tmp_path, CONTAINER_V1, "4:memory:/other\n"))
    assert v1 is None and "memory controller" in missing


def _cgroup(path: Path, controllers: str = "", subtree: str = "", procs: str = "") -> Path:
    """A directory standing for a cgroup v2 directory."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.controllers").write_text(controllers)
    (path / "cgroup.subtree_control").write_text(subtree)
    (path / "cgroup.procs").write_text(procs)
    return path


@pytest.fixture
def mount(tmp_path: Path) -> Path:
    return _cgroup(tmp_path / "cg", controllers="cpu io memory pids", subtree="cpu memory pids")


@pytest.fixture
def own_namespace() -> Iterator[Path]:
    """The cgroup namespace of a process that has one of its own (``unshare --cgroup``): its
    ``/proc/PID/ns/cgroup``, for as long as the test runs."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here")
    for user in ([], ["--user", "--map-root-user"]):
        proc = subprocess.Popen(
            ["unshare", *user, "--cgroup", "sh", "-c", "echo in; exec sleep 120"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        if proc.stdout.readline().strip() == "in":
            try:
                yield Path(f"/proc/{proc.pid}/ns/cgroup")
            finally:
                proc.kill()
                proc.wait()
            return
        proc.wait()
    pytest.skip("no cgroup namespace can be made here")


def _initial_namespace() -> Path:
    """This process's cgroup namespace where it is the host's own (else the test is skipped)."""
    if os.stat(cgroup_module.CGROUP_NAMESPACE).st_ino != cgroup_module.INITIAL_CGROUP_NAMESPACE:
        pytest.skip("this process is not in the host's own cgroup namespace")
    return cgroup_module.CGROUP_NAMESPACE


def test_v2_its_own_cgroup_where_memory_is_enabled_for_children(mount: Path, own_namespace: Path) -> None:
    place = _v2_place(mount, mount, own_namespace)
    assert isinstance(place, CgroupPlace) and place.parent == mount and place.version == 2


def test_v2_the_hosts_root_cgroup_is_never_taken_as_delegated(
    tmp_path: Path, mount: Path, own_namespace: Path
) -> None:
    """Review 40b's L-e: a process in the real root cgroup (the root of the host's own cgroup namespace,
    or any root on a kernel without cgroup namespaces) was taken as the root of a cgroup namespace of
    its own, delegated: its cgroups were to be made in the host's root. Only a namespace of its own is
    (a real one here, made by ``unshare --cgroup``). Before, all three were delegated."""
    assert _delegated(mount, mount, tmp_path / "no-cgroup-namespaces") is None
    assert _delegated(mount, mount, _initial_namespace()) is None
    why = _v2_place(mount, mount, _initial_namespace())
    assert isinstance(why, str) and "not delegated" in why, why
    assert _delegated(mount, mount, own_namespace) == "the root of its cgroup namespace"


def _delegate(path: Path) -> None:
    """What systemd writes on a unit's cgroup with ``Delegate=yes``."""
    try:
        os.setxattr(path, "trusted.delegate", b"1")
    except OSError as e:
        pytest.skip(f"no trusted extended attributes here: {e}")


def test_v2_alone_in_a_delegated_cgroup_it_moves_itself_into_a_leaf(mount: Path) -> None:
    own = _cgroup(mount / "svc", controllers="cpu memory pids", procs=f"{os.getpid()}\n")
    _delegate(own)
    _cgroup(own / EXECUTOR_LEAF)  # what mkdir makes in a real cgroupfs
    place = _v2_place(own, mount)
    assert isinstance(place, CgroupPlace) and place.parent == own, place
    assert (own / EXECUTOR_LEAF / "cgroup.procs").read_text() == str(os.getpid())
    # +memory, then +pids (best effort), each written over the file's start here
    assert (own / "cgroup.subtree_control").read_text() == "+pidsry"


def test_v2_a_cgroup_not_delegated_is_left_alone_and_no_ancestor_is_taken(mount: Path) -> None:
    """Review 40 M2: the GPU device's facts (its cgroup holds the agent's processes, its parent enables
    memory): before, the nearest writable ancestor was taken, outside the executor's own limits. Now
    off, and the executor stays where it is, even alone in its cgroup."""
    middle = _cgroup(mount / "process_api", controllers="cpu memory pids", subtree="memory")
    own = _cgroup(middle / "abc", controllers="cpu", procs=f"{os.getpid()}\n1\n")
    why = _v2_place(own, mount)
    assert isinstance(why, str) and "not delegated" in why, why
    alone = _cgroup(middle / "svc", controllers="memory pids", procs=f"{os.getpid()}\n")
    why = _v2_place(alone, mount)
    assert isinstance(why, str) and "not delegated" in why, why
    assert not (alone / EXECUTOR_LEAF).exists()


def test_v2_nowhere_says_why(mount: Path) -> None:
    (mount / "cgroup.subtree_control").write_text("cpu")
    own = _cgroup(mount / "abc", controllers="cpu", procs=f"{os.getpid()}\n1\n")
    _delegate(own)
    why = _v2_place(own, mount)
    assert isinstance(why, str) and "1 other process(es)" in why and "trusted.delegate" in why, why
    (mount / "cgroup.controllers").write_text("cpu io")
    why = _v2_place(own, mount)
    assert isinstance(why, str) and "no memory controller" in why, why


def test_off_and_a_directory_that_is_no_cgroup(tmp_path: Path) -> None:
    assert find_place("off").place is None and find_place("off").says.startswith("off")
    named = find_place(str(tmp_path))
    assert named.place is None and "no cgroup directory" in named.says


def _worker_cgroup(path: Path, version: int, files: dict[str, str]) -> WorkerCgroup:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    place = CgroupPlace(2 if version == 2 else 1, path.parent, "test")
    return WorkerCgroup(place, path)


def test_v2_limit_and_figures(tmp_path: Path) -> None:
    cgroup = _worker_cgroup(
        tmp_path / "w",
        2,
        {"memory.max": "", "memory.swap.max": "", "memory.peak": "123456789\n", "memory.events": ""},
    )
    cgroup.limit(512 << 20)
    assert (cgroup.path / "memory.max").read_text() == str(512 << 20)
    assert (cgroup.path / "memory.swap.max").read_text() == "0"
    (cgroup.path / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 0\noom_kill 0\noom_group_kill 0\n")
    figures = cgroup.memory()
    assert figures.peak == 123456789 and not figures.exceeded  # reclaim at the limit (max 7) is no refusal
    (cgroup.path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 0\noom_group_kill 3\n")
    figures = cgroup.memory()
    assert figures.exceeded and figures.oom_kills == 3 and "peak 117 MiB" in figures.describe()


def test_v1_limit_keeps_memsw_at_or_above_memory(tmp_path: Path) -> None:
    writes: list[str] = []
    cgroup = _worker_cgroup(
        tmp_path / "w",
        1,
        {
            "memory.limit_in_bytes": "",
            "memory.memsw.limit_in_bytes": "",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
            "memory.max_usage_in_bytes": "2048\n",
        },
    )
    real_write = os.write

    def logged(fd: int, data: bytes) -> int:
        writes.append(os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1])
        return real_write(fd, data)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "write", logged)
        cgroup.limit(1 << 30)  # from no limit: memory first
        cgroup.limit(2 << 30)  # raised: memory+swap first
        cgroup.limit(1 << 29)  # lowered: memory first
    assert writes == [
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.limit_in_bytes",
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
    ]
    figures = cgroup.memory()
    assert figures.exceeded and figures.peak == 2048


def test_a_limit_that_cannot_be_written_is_an_error(tmp_path: Path) -> None:
    cgroup = _worker_cgroup(tmp_path / "w", 2, {})
    with pytest.raises(CgroupError, match=r"memory\.max"):
        cgroup.limit(1 << 30)


def test_where_the_cgroup_cannot_be_written_they_are_off_and_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unprivileged executor, or a read-only cgroupfs: its own v1 cgroup is there but not writable."""
    mountinfo = f"35 31 0:32 / {tmp_path / 'memory'} rw,relatime - cgroup cgroup rw,memory\n"
    membership, info = _files(tmp_path, mountinfo, "4:memory:/svc\n")
    (tmp_path / "memory" / "svc").mkdir(parents=True)
    (tmp_path / "memory" / "svc" / "cgroup.procs").write_text(f"{os.getpid()}\n")
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)
    found = find_place("auto", membership, info)
    assert (
        found.place is None and found.says == f"off: cgroup v1: {tmp_path / 'memory' / 'svc'} is not writable"
    )


V1_FILES = ("memory.limit_in_bytes", "cgroup.procs", "memory.oom_control", "memory.max_usage_in_bytes")


def _v1_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory standing for a v1 memory cgroup (what find_place checks for a named one); a directory
    made below it gets the files the kernel would put there."""
    parent = tmp_path / "memory"
    parent.mkdir()
    for name in V1_FILES:
        (parent / name).write_text("")
    real_mkdir = Path.mkdir

    def mkdir(path: Path, *args: Any, **kwargs: Any) -> None:
        real_mkdir(path, *args, **kwargs)
        if path.parent == parent:
            for name in V1_FILES:
                (path / name).write_text("0\n")
            (path / "cgroup.procs").write_text("")  # what a process that enters writes goes nowhere

    real_rmdir = Path.rmdir

    def rmdir(path: Path) -> None:  # a cgroup's files go with it
        if path.parent == parent:
            for child in path.iterdir():
                child.unlink()
        real_rmdir(path)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(Path, "rmdir", rmdir)
    return parent


def test_an_executor_that_is_not_root_makes_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 40 H1: its workers' code runs as its own uid (the jail's mapped root), owner of every cgroup
    it makes: it could lift its limit or leave its cgroup. Off for a named directory as for auto (the
    reviewer's setup: a directory chowned to the executor's uid)."""
    parent = _v1_place(tmp_path, monkeypatch)
    monkeypatch.setattr("executor.cgroup.is_root", lambda: False)
    for setting in (str(parent), "auto"):
        found = find_place(setting)
        assert found.place is None and found.says.startswith("off: the executor is not root"), found.says
    assert not [p for p in parent.iterdir() if p.is_dir()]
    monkeypatch.setattr("executor.cgroup.is_root", lambda: True)
    found = find_place(str(parent))
    assert found.place is not None, found.says  # the same directory, a root executor's


def test_unjailed_workers_get_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = find_place(str(_v1_place(tmp_path, monkeypatch)), jailed=False)
    assert found.place is None and "not jailed" in found.says, found.says


def test_a_place_a_worker_could_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first cgroup made is checked: a parent of another uid's (a worker's), or one others may write."""
    parent = _v1_place(tmp_path, monkeypatch)
    os.chmod(parent / "cgroup.procs", 0o666)
    found = find_place(str(parent))
    assert found.place is None and "writable by others" in found.says, found.says
    os.chmod(parent / "cgroup.procs", 0o644)
    os.chown(parent, 65534, 65534)
    found = find_place(str(parent))
    assert found.place is None and "belongs to uid 65534" in found.says, found.says
    assert not [p for p in parent.iterdir() if p.is_dir()]


def test_names_the_sweep_and_a_taken_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 40 L1/L2: names carry the pid namespace and a token of the executor's; the sweep removes
    the empty cgroups of dead executors of its own namespace and those its own pid left (an earlier
    executor's), another namespace's only where it can tell that its executor is gone (from the host's
    own pid namespace: below); a name taken is passed over."""
    place = CgroupPlace(1, tmp_path, "test")
    ns, me = cgroup_module._pid_namespace(), os.getpid()
    dead = 2**22 + 1  # above pid_max's default: no such process
    names = {
        "mine_earlier": f"{PREFIX}{ns}-{me}-00000000-1",
        "dead": f"{PREFIX}{ns}-{dead}-abcdef01-3",
        "alive": f"{PREFIX}{ns}-1-abcdef01-1",
        "other_namespace": f"{PREFIX}{ns + 1}-{dead}-abcdef01-1",
        "held": f"{PREFIX}{ns}-{dead}-abcdef02-1",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
    (tmp_path / names["held"] / "cgroup.procs").write_text("4242\n")
    cgroup_module._remove_stale(place)
    left = {key for key, name in names.items() if (tmp_path / name).exists()}
    # no process anywhere is ``dead``: swept where every namespace is in sight
    seen_all = ns == cgroup_module.INITIAL_PID_NAMESPACE
    assert left == {"alive", "held"} | (set() if seen_all else {"other_namespace"}), left
    monkeypatch.setattr(cgroup_module, "_serial", iter([7, 8]))
    (tmp_path / f"{cgroup_module._name_prefix()}7").mkdir()
    made = WorkerCgroup.make(place)
    assert made.path.name == f"{cgroup_module._name_prefix()}8"


def _in_a_pid_namespace() -> tuple[subprocess.Popen[str], int, int]:
    """A process (``sleep``) in a pid namespace of its own whose pid there is no process of this
    namespace: (the namespace's ``unshare``, the namespace's inode, the pid there)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make a pid namespace")
    free = [n for n in range(20000, 32000, 97) if not Path(f"/proc/{n + 1}").exists()]
    script = f"echo {free[0]} > /proc/sys/kernel/ns_last_pid; sleep 120 & echo $!; readlink /proc/self/ns/pid; wait"
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    pid, namespace = int(proc.stdout.readline()), proc.stdout.readline().strip()
    if Path(f"/proc/{pid}").exists():
        proc.kill()
        pytest.skip(f"pid {pid} was taken here meanwhile")
    return proc, int(namespace.removeprefix("pid:[").rstrip("]")), pid


def test_the_sweep_removes_other_namespaces_and_old_names_only_once_their_executor_is_gone(
    tmp_path: Path,
) -> None:
    """Review 40b's L-f: old names (``PREFIX<pid>-<n>``, session 39's first) and other pid namespaces'
    were never swept. From the host's own pid namespace, where every process is in sight, an empty one
    is removed once no process is its executor's pid in its namespace (in any, for an old name); a live
    executor's, here a process of a real pid namespace whose pid there is no pid here, stays (review 40
    L2). Before, all were left (seen with the sweep of 54acefa)."""
    if cgroup_module._pid_namespace() != cgroup_module.INITIAL_PID_NAMESPACE:
        pytest.skip("not in the host's own pid namespace")
    proc, namespace, pid = _in_a_pid_namespace()
    try:
        dead = 2**22 + 1  # above pid_max's default: no such process in any namespace
        names = {
            "live_there": f"{PREFIX}{namespace}-{pid}-abcdef01-1",
            "dead_there": f"{PREFIX}{namespace}-{dead}-abcdef01-2",
            "namespace_gone": f"{PREFIX}{namespace + 1_000_000}-{pid}-abcdef01-1",
            "old_live_there": f"{PREFIX}{pid}-1",
            "old_live_here": f"{PREFIX}1-1",
            "old_dead": f"{PREFIX}{dead}-2",
            "old_held": f"{PREFIX}{dead}-3",
            "old_mine": f"{PREFIX}{os.getpid()}-4",  # never made by this one: an earlier executor's
        }
        for name in names.values():
            (tmp_path / name).mkdir()
        (tmp_path / names["old_held"] / "cgroup.procs").write_text("4242\n")
        cgroup_module._remove_stale(CgroupPlace(1, tmp_path, "test"))
        left = {key for key, name in names.items() if (tmp_path / name).exists()}
        assert left == {"live_there", "old_live_there", "old_live_here", "old_held"}, left
    finally:
        proc.kill()
        proc.wait()


_SWEEP_IN_A_NAMESPACE = """
import json, os, sys
from pathlib import Path
from executor import cgroup
parent, ns, dead = Path(sys.argv[1]), cgroup._pid_namespace(), 2**22 + 1
names = {
    "own_dead": f"{cgroup.PREFIX}{ns}-{dead}-abcdef01-1",
    "other_dead": f"{cgroup.PREFIX}{ns + 1}-{dead}-abcdef01-1",
    "old_dead": f"{cgroup.PREFIX}{dead}-1",
}
for name in names.values():
    (parent / name).mkdir()
cgroup._remove_stale(cgroup.CgroupPlace(1, parent, "test"))
print(json.dumps(sorted(key for key, name in names.items() if (parent / name).exists())))
"""


def test_inside_a_pid_namespace_the_sweep_leaves_other_namespaces_and_old_names(tmp_path: Path) -> None:
    """Inside a pid namespace other namespaces' processes are out of sight: an empty cgroup of another
    namespace's, or of an old name, may be a live executor's (between its making and its worker's entry,
    or its worker just killed at its limit, its figures not yet read): left. Its own namespace's dead
    executor's is removed. Seen failing with the sweep taking the host's way everywhere (both removed)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make a pid namespace")
    out = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            "-c",
            _SWEEP_IN_A_NAMESPACE,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == ["old_dead", "other_dead"], out.stdout


def test_v2_pids_max_where_the_pids_controller_is_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 40 M2: a fork bomb stays in its worker's cgroup."""
    real_mkdir = Path.mkdir

    def mkdir(path: Path, *args: Any, **kwargs: Any) -> None:
        real_mkdir(path)
        (path / "pids.max").write_text("")

    monkeypatch.setattr(Path, "mkdir", mkdir)
    made = WorkerCgroup.make(CgroupPlace(2, tmp_path, "test", pids_max=99))
    assert (made.path / "pids.max").read_text() == "99"


def test_the_default_pids_max_grows_with_the_host_cores() -> None:
    """Review 40b's L-d: threads count against pids.max (OpenBLAS's and an OpenMP candidate's, one per
    core, in the worker and its runner), so a fixed 1024 could refuse an honest candidate on a host of
    ~300 cores: 1024, or 8 per core where that is more, and the setting's default follows it."""
    assert default_pids_max(2) == 1024
    assert default_pids_max(128) == 1024
    assert default_pids_max(384) == 3072
    assert ExecutorSettings(cache_dir=Path("/nonexistent")).memory_cgroup_pids == default_pids_max()
