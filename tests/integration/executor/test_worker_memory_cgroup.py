"""A worker's memory cgroup bounds the host memory that no process of it maps (review 39b's open Medium).

``RLIMIT_AS`` (the host path) and the RSS watch (the GPU path) see only mapped memory: a candidate could
fill a ``memfd`` and unmap it (the descriptor kept), or write files to its jail's tmpfs (``/tmp``,
``/dev/shm``), and hold that memory past its limit. Each worker now runs in a memory cgroup of its own
(:mod:`executor.cgroup`), limited to the job's limit plus :data:`executor.cgroup.HEADROOM_BYTES`: the
kernel charges those pages to it, and kills a process of it at the limit. Here: jailed candidate workers
of the test-only ``host`` runtime, built as ``test_worker_ipc`` builds them, on this host's cgroup (v1 on
the dev machine, v2 on the GPU device: ``bench/device/cgroup_check.sh``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import executor
from executor.app import create_app
from executor.cgroup import (
    MOUNTINFO,
    PROC_CGROUP,
    CgroupMemory,
    CgroupPlace,
    WorkerCgroup,
    _own_cgroups,
    enter,
    placement,
)
from executor.errors import WorkerError
from executor.evaluate import Evaluator
from executor.jail import HOST_PATHS, JAIL_UID, Jail, Protection, is_root, protection, python_paths
from executor.reach import interpreter_needs, refusal, unreachable
from executor.sandbox import WorkerProcess, _job_dirs, take_worker_uid
from executor.settings import ExecutorSettings
from executor.verdict import ErrorKind
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import (
    run_saxpy_job,
    saxpy_worker_job,
    use_candidate_process,
    use_worker_process,
)

# The setting as the executor reads it (bench/device/cgroup_check.sh names a directory on the GPU device,
# whose own cgroup is not delegated to it), "auto" without.
SETTING = os.environ.get("REGRAPH_EXECUTOR_MEMORY_CGROUPS", "auto")
PLACE = placement(SETTING).place
pytestmark = [
    pytest.mark.skipif(protection() != "namespace", reason="no namespaces on this host"),
    pytest.mark.skipif(PLACE is None, reason=f"no memory cgroups here ({placement(SETTING).says})"),
]

MB = 1 << 20
# The job's memory limit: the worker's RLIMIT_AS (what an honest host worker needs, with room), and its
# cgroup's limit with the headroom. 768 MiB was room enough on the 2-core dev machine, not on the 16-core
# GPU device (its honest saxpy refused "host memory exhausted" by RLIMIT_AS, session 39); 1 GiB passed
# there (the cgroup's peak 349-394 MiB).
LIMIT = 1024 * MB
# What the hoarders hold: well past the cgroup's limit, within the jail's tmpfs sizes (/tmp on the
# jail's root, 1 GiB; /dev/shm, 256 MiB).
HOARD_MB = 1280

SAXPY = "  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n}\n"
# saxpy that, on its first call, fills a memfd of HOARD_MB in 32-MiB windows, each mapped, written and
# unmapped again (never more than 32 MiB mapped: nothing of it in RLIMIT_AS or any process's RSS), and
# keeps the descriptor. Right in every other way.
MEMFD_HOARDER = (
    r"""
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
static int hoard = -1;
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  if (hoard < 0) {
    hoard = memfd_create("hoard", 0);
    const long window = 32l << 20, total = HOARD_MBl << 20;
    if (hoard >= 0 && ftruncate(hoard, total) == 0) {
      for (long at = 0; at < total; at += window) {
        void* p = mmap(0, window, PROT_READ | PROT_WRITE, MAP_SHARED, hoard, at);
        if (p == MAP_FAILED) break;
        std::memset(p, 1, window);
        munmap(p, window);
      }
    }
  }
"""
    + SAXPY
).replace("HOARD_MB", str(HOARD_MB))
# saxpy that, on its first call, writes HOARD_MB of files to its jail's tmpfs: /dev/shm until it is full
# (256 MiB), the rest to /tmp, in 1-MiB writes; the files stay (nothing maps them).
TMPFS_HOARDER = (
    r"""
#include <cstdio>
#include <cstring>
static bool done = false;
static long put(const char* path, long mb) {
  static char block[1 << 20];
  std::memset(block, 1, sizeof block);
  FILE* f = std::fopen(path, "wb");
  long written = 0;
  if (!f) return 0;
  for (; written < mb; ++written) {
    if (std::fwrite(block, 1, sizeof block, f) != sizeof block || std::fflush(f) != 0) break;
  }
  std::fclose(f);
  return written;
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  if (!done) { done = true; long shm = put("/dev/shm/hoard", HOARD_MB); put("/tmp/hoard", HOARD_MB - shm); }
"""
    + SAXPY
).replace("HOARD_MB", str(HOARD_MB))
HONEST = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n' + SAXPY


@pytest.fixture(autouse=True)
def _one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """One OpenBLAS thread in the workers (the jail keeps ``OPENBLAS_`` variables): numpy's OpenBLAS
    reserves address space per thread at its import, one thread per core (numpy alone read a VmSize of
    725 MB with 16 threads on the 16-core GPU device, 110 MB with one), which :data:`LIMIT`, a worker's
    ``RLIMIT_AS`` here, would otherwise have to make room for on a host of many cores."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")


def _run_in_worker(
    tmp_path: Path,
    source: str,
    cgroups: CgroupPlace | None = PLACE,
    seen: list[Path] | None = None,
    figures: list[CgroupMemory] | None = None,
    protection: Protection = "namespace",
) -> WorkerOutcome:
    """saxpy's ``source``, built plainly (no static rules) and run in a jailed candidate worker whose job
    has the memory limit :data:`LIMIT` (under ``protection``: the jail by default), in a memory cgroup under
    ``cgroups`` (None: none); the cgroup's
    path is added to ``seen``, what it recorded to ``figures``."""
    job, product = saxpy_worker_job(tmp_path, source)
    proc = WorkerProcess("candidate", "host", binds=_job_dirs(job), cgroups=cgroups, protection=protection)
    try:
        if seen is not None and proc.cgroup is not None:
            seen.append(proc.cgroup.path)
            assert proc.pid in proc.cgroup.processes() or proc.proc.pid in proc.cgroup.processes()
        return run_saxpy_job(proc, job, product, LIMIT)
    finally:
        if figures is not None and proc.cgroup is not None:
            figures.append(proc.cgroup.memory())
        proc.close()


def _refused_for_memory(outcome: WorkerOutcome) -> None:
    assert not outcome.passed and outcome.error is ErrorKind.OUT_OF_MEMORY, (outcome.error, outcome.message)
    assert f"worker exceeded {LIMIT} bytes of host memory" in outcome.message, outcome.message
    assert "its memory cgroup" in outcome.message, outcome.message


def test_a_memfd_filled_and_unmapped_in_the_worker_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate in its worker's process fills the memfd: its pages are charged to the worker's
    cgroup. Without the cgroup the candidate passed. (In a runner, where a function candidate runs by
    default, this candidate filled it too, its pages charged to the same cgroup, until session 40: the
    runner's filter now refuses memfd_create, test_candidate_process.py.)"""
    use_worker_process(monkeypatch)
    seen: list[Path] = []
    _refused_for_memory(_run_in_worker(tmp_path, MEMFD_HOARDER, seen=seen))
    assert seen and not seen[0].exists()


def test_files_written_to_the_jails_tmpfs_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate in its worker's process writes files to /dev/shm and /tmp of its jail (tmpfs):
    nothing maps them. Without the cgroup the candidate passed."""
    use_worker_process(monkeypatch)
    seen: list[Path] = []
    _refused_for_memory(_run_in_worker(tmp_path, TMPFS_HOARDER, seen=seen))
    assert seen and not seen[0].exists()


def test_a_worker_without_the_namespace_jail_is_in_its_cgroup_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cgroup does not depend on the namespaces: a worker started without them (protection ``uid``,
    as a uid of its own, where namespaces are refused) enters its cgroup the same way. (Before review 40
    this ran with protection ``none``, which now gets no cgroup: the next test.)"""
    # The worker runs as another uid with no mount namespace: the interpreter, the executor's package and
    # PYTHONPATH's entries must be in its reach (asked as a worker's uid), and so must its job's files,
    # kept out of pytest's tmp_path (under a 0700 directory): the GPU device's "worker exited with status 1
    # during startup" of session 39 was the reference's library there, "Permission denied".
    if is_root():
        uid, held = take_worker_uid()
        try:
            closed = unreachable(interpreter_needs(Path(executor.__file__).parent, sys.path), uid, JAIL_UID)
        finally:
            held.close()
        if closed:
            pytest.skip(refusal(closed, "a worker's uid"))
    use_worker_process(monkeypatch)
    seen: list[Path] = []
    job_dir = Path(tempfile.mkdtemp(prefix="regraph-test-uid-"))  # in /tmp (1777): others pass
    try:
        _refused_for_memory(_run_in_worker(job_dir, MEMFD_HOARDER, seen=seen, protection="uid"))
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)
    assert seen and not seen[0].exists()


def test_a_worker_that_runs_as_the_executor_gets_no_cgroup(tmp_path: Path) -> None:
    """Protection ``none``: its code runs as the executor's uid, which may write the cgroup: no cgroup
    (review 40 H1), rather than a limit it could lift."""
    proc = WorkerProcess("candidate", "host", cgroups=PLACE, protection="none")
    try:
        assert proc.cgroup is None
    finally:
        proc.close()


# In the jail, as the candidate: raise its own cgroup's limit, then move itself to the cgroup's parent.
ESCAPE = """
import sys
limit, parent = sys.argv[1], sys.argv[2]
for path, value in ((limit, "9223372036854771712"), (parent, "0")):
    try:
        with open(path, "w") as f:
            f.write(value)
        print("written", path)
    except OSError as e:
        print("refused", path, e.strerror)
print(open("/proc/self/cgroup").read().strip().replace(chr(10), " "))
import os
print("listed", sorted(os.listdir("/sys/fs/cgroup")))
for line in open("/proc/self/mountinfo"):
    if line.split()[4].startswith("/sys"):
        print("mount", line.split()[4], line.split()[5])
"""


def test_a_jailed_candidate_cannot_raise_its_limit_nor_leave_its_cgroup(tmp_path: Path) -> None:
    """Review 40 H1: the jail binds /sys for the CUDA driver; the cgroup file system below it was
    writable. Now every mount at or below /sys is read-only in the jail, the worker's cgroup is the root
    of its cgroup namespace, and /sys/fs/cgroup is covered by an empty read-only tmpfs (review 40b's
    L-c): both writes are refused, the files are not there to be opened (with the read-only remounts and
    no cover: "Read-only file system"; with the read-only remount of /sys's top only, the files'
    permissions': "Permission denied" as uid 65534)."""
    assert PLACE is not None
    cgroup = WorkerCgroup.make(PLACE)
    try:
        cgroup.limit(256 * MB)
        limit = cgroup.path / ("memory.max" if PLACE.version == 2 else "memory.limit_in_bytes")
        jail = Jail(read_only=(*HOST_PATHS, *python_paths(Path(executor.__file__).parent), "/sys"))
        root = Path(tempfile.mkdtemp(prefix="regraph-jail-root-"))
        tmp_path.chmod(0o777)
        argv, env, _ = jail.command(
            [sys.executable, "-I", "-c", ESCAPE, str(limit), str(PLACE.parent / "cgroup.procs")],
            tmp_path,
            root,
            "namespace",
        )
        fd = cgroup.open_procs()
        try:
            out = subprocess.run(
                argv, env=env, capture_output=True, text=True, timeout=60, preexec_fn=lambda: enter(fd)
            )
        finally:
            os.close(fd)
            shutil.rmtree(root, ignore_errors=True)
        print(out.stdout, out.stderr)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("refused") == 2 and "written" not in out.stdout, out.stdout
        assert out.stdout.count("No such file or directory") == 2, out.stdout
        assert "listed []" in out.stdout.splitlines(), out.stdout
        assert int(limit.read_text()) == 256 * MB
        mounts = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("mount ")]
        assert mounts and all(options.split(",")[0] == "ro" for _, options in mounts), mounts
        # the cover, mounted last over the cgroup file systems (still listed below it, out of reach)
        assert [point for point, _ in mounts][-1] == "/sys/fs/cgroup", mounts
    finally:
        assert cgroup.remove()


@pytest.mark.parametrize("where", ["worker", "runner"])
def test_an_honest_candidate_passes_in_its_cgroup_and_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    (use_worker_process if where == "worker" else use_candidate_process)(monkeypatch)
    seen: list[Path] = []
    figures: list[CgroupMemory] = []
    outcome = _run_in_worker(tmp_path, HONEST, seen=seen, figures=figures)
    assert outcome.passed, outcome.message
    assert ("runner_roundtrip" in outcome.seconds) == (where == "runner"), outcome.seconds
    print(f"honest saxpy in its {where}: the cgroup's {figures[0].describe()}")
    assert not figures[0].exceeded
    assert seen, "the worker had no memory cgroup"
    assert not seen[0].exists(), f"{seen[0]} is still there after the worker"


def test_the_evaluators_workers_get_cgroups_unless_off(tmp_path: Path) -> None:
    """The setting reaches the pool, and GET /v1/device's memory_cgroups says where they are; 'off' turns
    them off and says so."""
    on = Evaluator(ExecutorSettings(cache_dir=tmp_path / "on", runtime="host", prewarm_workers=False))
    try:
        assert on.pool.cgroups == PLACE
        worker = on.pool.take("candidate")
        try:
            assert worker.cgroup is not None and worker.cgroup.path.is_dir()
            path = worker.cgroup.path
        finally:
            worker.close()
        assert not path.exists()
    finally:
        on.close()
    for setting, says in ((SETTING, "each worker in a memory cgroup of its own"), ("off", "off: ")):
        settings = ExecutorSettings(
            cache_dir=tmp_path / setting, runtime="host", prewarm_workers=False, memory_cgroups=setting
        )
        with TestClient(create_app(settings)) as client:
            device = client.get("/v1/device").json()
        assert device["memory_cgroups"].startswith(says), device


def _processes_left_in(cgroup: WorkerCgroup) -> list[subprocess.Popen[bytes]]:
    """Four processes started in ``cgroup`` (entered between fork and exec): a ``sleep``, and a shell
    that left its process group (``setsid``) with its background ``sleep``; the two started here."""
    fd = cgroup.open_procs()
    try:
        left = [
            subprocess.Popen(["sleep", "60"], preexec_fn=lambda: enter(fd)),
            subprocess.Popen(["setsid", "sh", "-c", "sleep 60 & sleep 60"], preexec_fn=lambda: enter(fd)),
        ]
    finally:
        os.close(fd)
    deadline = time.monotonic() + 10
    while len(cgroup.processes()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(cgroup.processes()) == 4, cgroup.processes()
    return left


def test_a_v2_cgroups_removal_kills_what_is_left_in_it() -> None:
    """cgroup v2's way out (``cgroup.kill``, then ``rmdir``), on this host's cgroup2 mount whatever its
    controllers (here the hybrid host's, which has no memory controller): processes left in the cgroup,
    one that left its process group (``setsid``) included, are killed and the cgroup removed."""
    mount = _own_cgroups(PROC_CGROUP, MOUNTINFO)[2]
    if mount is None or not os.access(mount, os.W_OK):
        pytest.skip("no writable cgroup2 mount here")
    cgroup = WorkerCgroup.make(CgroupPlace(2, mount, "test"))
    left = _processes_left_in(cgroup)
    assert (cgroup.path / "cgroup.kill").exists()
    assert cgroup.remove(timeout_s=10)
    assert not cgroup.path.exists()
    assert [p.wait(timeout=10) for p in left] == [-9, -9]


def test_the_removal_kills_what_left_the_workers_group() -> None:
    """In this host's place (v1 here: no cgroup.kill), processes left in a cgroup, one that left its
    process group (``setsid``) and its child included, are killed one by one through pidfds (review 40
    L3, L5) and the cgroup removed."""
    assert PLACE is not None
    cgroup = WorkerCgroup.make(PLACE)
    left = _processes_left_in(cgroup)
    assert cgroup.remove(timeout_s=5)
    assert not cgroup.path.exists()
    assert [p.wait(timeout=10) for p in left] == [-9, -9]


def test_a_worker_its_cgroup_refuses_does_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry between fork and exec refused (here a ``cgroup.procs`` that is /dev/full: ENOSPC, as a
    kernel refuses a cgroup past its pids.max or one being removed): the worker does not start, rather
    than run outside its cgroup (review 40 L5), and its cgroup is removed."""
    parent = tmp_path / "place"
    parent.mkdir()
    real_mkdir = Path.mkdir

    def mkdir(path: Path, *args: Any, **kwargs: Any) -> None:
        real_mkdir(path, *args, **kwargs)
        if path.parent == parent:
            (path / "cgroup.procs").symlink_to("/dev/full")

    real_rmdir = Path.rmdir

    def rmdir(path: Path) -> None:
        if path.parent == parent:
            (path / "cgroup.procs").unlink()
        real_rmdir(path)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(Path, "rmdir", rmdir)
    monkeypatch.setattr(WorkerCgroup, "processes", lambda self: [])
    with pytest.raises(WorkerError, match="cannot start a worker"):
        WorkerProcess("candidate", "host", cgroups=CgroupPlace(1, parent, "test"), protection="namespace")
    assert list(parent.iterdir()) == []
