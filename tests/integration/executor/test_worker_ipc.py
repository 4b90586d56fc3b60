"""What a jailed worker leaves for the next one: nothing in SysV IPC, nothing in the GPU lock files.

Review 25 had a candidate keep every timing-size answer in a SysV shared-memory segment (``shmget`` and
``shmat`` declared by hand pass the static rules): the workers shared the host's IPC namespace, so a
second submission of the same code found every answer there, first visits included, and passed at
a median of 0.036 ms against the honest code's 211 ms here; and the segments outlived the worker and
its memory limit (1.5 GB left on the host after a worker limited to 1 GB). Each namespace-jailed worker now has an IPC namespace of its own
(executor.jail: ``unshare --ipc``), whose objects die with its last process. The GPU lock files were
bound writable into every worker (mode 0666), a store of the same kind: they are now bound read-only
and opened read-only for their flocks (executor.gpulock.open_lock). The kernel's keyrings are no
namespace's (the user keyring of the jail's uid outlives its processes): the jail refuses their
system calls (executor.jail_init's seccomp filter).

Real evaluators and workers in the test-only ``host`` runtime.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.jail import protection
from executor.jail_init import IPC_LIMITS
from executor.protocol import CandidateSource, EvaluationOptions
from executor.sandbox import WorkerProcess, _job_dirs, remove_ipc_of
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from executor.worker.messages import WorkerOutcome
from tests.integration.executor.test_executor_hacks_host import POLY_BODY, POLY_HEAD, POLY_TASK
from tests.support.hostcode import FIXTURE_TASKS as TASKS_DIR
from tests.support.hostcode import STUB, run_saxpy_job, saxpy_worker_job, use_worker_process, write_task

pytestmark = pytest.mark.skipif(protection() != "namespace", reason="no namespaces on this host")

# Every answer at the timing size kept in a segment under KEY, keyed by four of the input's values.
MEMO = (
    r"""
#include <cstring>
extern "C" int shmget(int key, unsigned long size, int flags);
extern "C" void* shmat(int id, const void* addr, int flags);
struct Entry { int used; int n; float k[4]; };
#define SLOTS 16
#define MAXN 131072
#define STRIDE (sizeof(Entry) + MAXN * sizeof(float))
static char* base = 0;
"""
    + POLY_HEAD
    + r"""
  if (n > 100000 && n <= MAXN) {
    if (!base) { int id = shmget(KEY, SLOTS * STRIDE, 01000 | 0666); base = id >= 0 ? (char*)shmat(id, 0, 0) : (char*)-1; }
    if (base != (char*)-1) {
      float k[4] = {x[0], x[n / 3], x[n / 2], x[n - 1]};
      for (int s = 0; s < SLOTS; ++s) {
        Entry* e = (Entry*)(base + s * STRIDE);
        if (e->used && e->n == n && std::memcmp(e->k, k, sizeof k) == 0) { std::memcpy(y, e + 1, n * sizeof(float)); return; }
      }
      for (int i = 0; i < n; ++i) { """
    + POLY_BODY
    + r""" }
      for (int s = 0; s < SLOTS; ++s) {
        Entry* e = (Entry*)(base + s * STRIDE);
        if (!e->used) { std::memcpy(e + 1, y, n * sizeof(float)); e->n = n; std::memcpy(e->k, k, sizeof k); e->used = 1; break; }
      }
      return;
    }
  }
  for (int i = 0; i < n; ++i) { """
    + POLY_BODY
    + " }\n}\n"
    + STUB
)
# As much as the jail's SysV limits let a worker hold (executor.jail_init.IPC_LIMITS: 16 MiB a segment,
# 32 MiB in all; 6 x 64 MB before them).
SEGMENTS, SEGMENT_MB = 2, 16
# saxpy that leaves SEGMENTS segments of SEGMENT_MB, written through, on its first call; right only
# where it made them all (so that the test below has something to see gone).
LEAVER = (
    r"""
#include <cstring>
extern "C" int shmget(int key, unsigned long size, int flags);
extern "C" void* shmat(int id, const void* addr, int flags);
extern "C" int shmdt(const void* addr);
static int done = 0, made = 0;
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  if (!done) { done = 1;
    for (int s = 0; s < SEGMENTS; ++s) { int id = shmget(KEY + s, SEGMENT_MBul << 20, 01000 | 0600);
      if (id >= 0) { void* p = shmat(id, 0, 0); if (p != (void*)-1) { std::memset(p, 1, SEGMENT_MBul << 20); shmdt(p); ++made; } } } }
  for (int i = 0; i < n; ++i) y[i] = made == SEGMENTS ? a * x[i] + y[i] : -1.0f;
}
""".replace("SEGMENT_MB", str(SEGMENT_MB)).replace("SEGMENTS", str(SEGMENTS))
    + STUB
)
# saxpy, right only when the GPU lock file (the worker's REGRAPH_GPU_LOCK) opens for reading and not
# for writing; a write that gets through leaves a mark in the file.
LOCK_WRITER = r"""
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  const char* lock = std::getenv("REGRAPH_GPU_LOCK");
  bool ok = lock != nullptr;
  if (ok) {
    int w = open(lock, O_WRONLY | O_APPEND);
    ok = w < 0 && (errno == EROFS || errno == EACCES);
    if (w >= 0) { ssize_t put = write(w, "memo", 4); (void)put; close(w); }
    int r = open(lock, O_RDONLY);
    ok = ok && r >= 0;
    if (r >= 0) close(r);
  }
  for (int i = 0; i < n; ++i) y[i] = ok ? a * x[i] + y[i] : -1.0f;
}
"""
# saxpy, right only when adding a key to the user keyring (add_key, a raw system call: no header
# needed) is refused with EPERM; a key that gets in is unlinked again at once.
KEY_ADDER = r"""
#include <cerrno>
#include <sys/syscall.h>
#include <unistd.h>
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  long key = syscall(SYS_add_key, "user", "DESCRIPTION", "memo", 4, -4);
  bool ok = key < 0 && errno == EPERM;
  if (key >= 0) syscall(SYS_keyctl, 9, key, -4);
  for (int i = 0; i < n; ++i) y[i] = ok ? a * x[i] + y[i] : -1.0f;
}
"""

# saxpy, right only when the jail's SysV limits hold: a segment of 128 MiB is refused, and segments of 8
# MiB, created until one is refused (at most 40: 320 MiB), hold no more than the namespace's total.
# Review 39b's shm_hoard filled two segments of 128 MiB and detached them: host memory outside RLIMIT_AS
# and every process's RSS.
SHM_HOARDER = r"""
extern "C" int shmget(int key, unsigned long size, int flags);
extern "C" void saxpy(int n, float a, const float* x, float* y) {
  bool ok = shmget(0, 128ul << 20, 01000 | 0600) < 0;
  unsigned long held = 0;
  for (int s = 0; s < 40 && shmget(0, 8ul << 20, 01000 | 0600) >= 0; ++s) held += 8ul << 20;
  ok = ok && held <= LIMIT;
  for (int i = 0; i < n; ++i) y[i] = ok ? a * x[i] + y[i] : -1.0f;
}
"""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


@pytest.fixture
def shm_key() -> Iterator[int]:
    """A random SysV key; whatever the host's namespace holds under it (and the next few) is removed."""
    key = secrets.randbelow(1 << 29) + 1
    yield key
    libc = _libc()
    for k in range(key, key + SEGMENTS):
        ident = libc.shmget(k, 0, 0)
        if ident >= 0:
            libc.shmctl(ident, 0, None)  # IPC_RMID


def _shmem_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no Shmem in /proc/meminfo")


def test_a_memo_in_sysv_shared_memory_does_not_reach_a_second_submission(
    tmp_path: Path, shm_key: int
) -> None:
    tmp_path.chmod(0o755)
    task = write_task(
        tmp_path / "tasks", POLY_TASK, POLY_HEAD + "for (int i = 0; i < n; ++i) { " + POLY_BODY + " } }"
    )
    options = EvaluationOptions(reference_repeats=1, baseline=False)
    memo = MEMO.replace("KEY", str(shm_key))
    evaluator = Evaluator(
        ExecutorSettings(
            cache_dir=tmp_path / "cache", runtime="host", prewarm_workers=False, run_timeout_s=120
        )
    )
    try:
        # The first is refused by the repeat-visit rule (repeats answered from the memo); the second,
        # with the memo of the first in reach, would find every answer there, first visits included.
        verdicts = [
            evaluator.evaluate(task, CandidateSource(source=memo + tail), options) for tail in ("", "// 2\n")
        ]
    finally:
        evaluator.close()
    for verdict in verdicts:
        assert not verdict.passed and verdict.error is ErrorKind.IMPLAUSIBLE, (verdict.error, verdict.message)
    assert _libc().shmget(shm_key, 0, 0) < 0  # nothing of it in the host's namespace


def test_a_workers_sysv_segments_are_gone_after_it_ends(tmp_path: Path, shm_key: int) -> None:
    task = load_task(TASKS_DIR / "saxpy")
    before = _shmem_mb()
    evaluator = Evaluator(
        ExecutorSettings(
            cache_dir=tmp_path / "cache", runtime="host", prewarm_workers=False, memory_limit_bytes=1 << 30
        )
    )
    try:
        verdict = evaluator.evaluate(
            task,
            CandidateSource(source=LEAVER.replace("KEY", str(shm_key))),
            EvaluationOptions(reference_repeats=1, baseline=False),
        )
    finally:
        evaluator.close()
    assert verdict.passed, (verdict.error, verdict.message)
    # The namespace is freed by the kernel shortly after its last process (asynchronously).
    deadline = time.monotonic() + 30.0
    left = _shmem_mb() - before
    while left > SEGMENTS * SEGMENT_MB // 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _shmem_mb() - before
    assert left <= SEGMENTS * SEGMENT_MB // 2, f"{left} MB of shared memory left after the worker ended"


def _run_in_worker(tmp_path: Path, source: str, gpu_lock: Path | None = None) -> WorkerOutcome:
    """saxpy's ``source``, built plainly (no static rules) and run in a jailed candidate worker."""
    job, product = saxpy_worker_job(tmp_path, source)
    proc = WorkerProcess("candidate", "host", gpu_lock=gpu_lock, binds=_job_dirs(job))
    try:
        assert proc.protection == "namespace"
        return run_saxpy_job(proc, job, product)
    finally:
        proc.close()


def test_a_jailed_worker_cannot_write_the_gpu_lock_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_worker_process(monkeypatch)  # the worker's view of them (a runner is not told where they are)
    lock = tmp_path / "gpu.lock"
    lock.touch()
    outcome = _run_in_worker(tmp_path, LOCK_WRITER, gpu_lock=lock)
    assert outcome.passed, outcome.message  # opened for reading, not for writing (the worker's flocks too)
    assert lock.read_bytes() == b""


def test_a_jailed_worker_cannot_keep_anything_in_a_keyring(tmp_path: Path) -> None:
    """The user keyring of the jail's uid outlives every process (no namespace holds it): a key added
    in one worker was read in the next. The jail refuses the keyring calls."""
    description = f"regraph-test-{secrets.token_hex(4)}"
    outcome = _run_in_worker(tmp_path, KEY_ADDER.replace("DESCRIPTION", description))
    assert outcome.passed, outcome.message  # add_key refused with EPERM


def test_a_jailed_worker_cannot_hoard_memory_in_sysv_segments(tmp_path: Path) -> None:
    """Review 39b's open Medium (older than the runner): SysV segments filled and detached hold host
    memory outside the worker's RLIMIT_AS and its RSS. The jail's IPC namespace has low SysV limits
    (executor.jail_init.IPC_LIMITS): one segment of 16 MiB at most, 32 MiB in all."""
    limit = IPC_LIMITS["kernel/shmall"] * 4096
    outcome = _run_in_worker(tmp_path, SHM_HOARDER.replace("LIMIT", f"{limit}ul"))
    assert outcome.passed, outcome.message


def test_what_a_uid_fallback_worker_leaves_in_the_hosts_ipc_is_removed() -> None:
    """Without namespaces a worker's SysV objects and POSIX shared memory stay in the host's IPC when
    it ends; the executor removes what its uid (its alone) owns there when it closes the worker."""
    uid = 62999
    name = f"regraph-test-{secrets.token_hex(4)}"
    child = os.fork()
    if child == 0:  # pragma: no cover - the worker's part, in the child
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            libc = _libc()
            ok = libc.shmget(0, 1 << 20, 0o1000 | 0o600) >= 0  # IPC_PRIVATE, IPC_CREAT
            ok = libc.semget(0, 1, 0o1000 | 0o600) >= 0 and ok
            ok = libc.msgget(0, 0o1000 | 0o600) >= 0 and ok
            Path("/dev/shm", name).write_bytes(b"memo")
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0

    def left() -> list[str]:
        found = [f for f in ("shm", "sem", "msg") if _owned_by(uid, f)]
        return found + ([name] if Path("/dev/shm", name).exists() else [])

    assert left() == ["shm", "sem", "msg", name]
    assert remove_ipc_of(uid) == 4
    assert left() == []


def _owned_by(uid: int, kind: str) -> bool:
    lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
    header = lines[0].split()
    return any(dict(zip(header, line.split(), strict=False)).get("uid") == str(uid) for line in lines[1:])
